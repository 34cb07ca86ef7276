#include "tessel/runtime/chrome_trace.h"

#include <nlohmann/json.hpp>

#include "tessel/schedule/action.h"

namespace tessel {

std::string chrome_trace_json(const std::vector<std::vector<TraceEvent>>& per_rank,
                              const std::vector<std::string>& track_names) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t r = 0; r < per_rank.size(); ++r) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", track_names.at(r)}}}});
    for (const TraceEvent& e : per_rank[r]) {
      const ActionKind kind = static_cast<ActionKind>(e.kind);
      std::string name = action_name(kind);
      if (e.microbatch >= 0) name += " mb" + std::to_string(e.microbatch);
      if (e.stage >= 0) name += " s" + std::to_string(e.stage);
      events.push_back({{"name", name},
                        {"cat", is_compute(kind)         ? "compute"
                                : is_communication(kind) ? "transfer"
                                                         : "optimizer"},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", e.start * 1e6},
                        {"dur", (e.end - e.start) * 1e6},
                        {"args", {{"microbatch", e.microbatch}, {"stage", e.stage}}}});
    }
  }
  nlohmann::json trace = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return trace.dump();
}

}  // namespace tessel
