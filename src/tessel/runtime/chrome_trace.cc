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
      nlohmann::json args = nlohmann::json::object();
      if (e.microbatch) {
        name += " mb" + std::to_string(*e.microbatch);
        args["microbatch"] = *e.microbatch;
      }
      if (e.stage) {
        name += " s" + std::to_string(*e.stage);
        args["stage"] = *e.stage;
      }
      events.push_back({{"name", name},
                        {"cat", is_compute(kind)         ? "compute"
                                : is_communication(kind) ? "transfer"
                                                         : "optimizer"},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", e.start * 1e6},
                        {"dur", (e.end - e.start) * 1e6},
                        {"args", args}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace tessel
