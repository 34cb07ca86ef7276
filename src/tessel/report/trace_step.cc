#include "tessel/report/trace_step.h"

#include <algorithm>
#include <limits>
#include <map>

#include "tessel/base/error.h"

namespace tessel::report {

using nlohmann::json;

json last_step_timeline(const json& trace, int64_t steps, const std::string& source,
                        std::vector<std::string>& warnings) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    warnings.push_back(str_cat(source, " has no \"traceEvents\" array; no timeline"));
    return nullptr;
  }
  std::map<int64_t, std::string> names;
  std::map<int64_t, std::vector<const json*>> per_rank;  // complete events, in file order
  for (const json& e : trace["traceEvents"]) {
    if (!e.is_object() || !e.contains("tid") || !e["tid"].is_number_integer()) continue;
    const int64_t tid = e["tid"].get<int64_t>();
    const std::string ph = e.value("ph", "");
    if (ph == "M" && e.value("name", "") == "thread_name" && e.contains("args"))
      names[tid] = e["args"].value("name", "rank " + std::to_string(tid));
    if (ph == "X" && e.contains("ts") && e["ts"].is_number() && e.contains("dur") &&
        e["dur"].is_number())
      per_rank[tid].push_back(&e);
  }
  if (per_rank.empty() || steps <= 0) {
    warnings.push_back(str_cat(source, " has no timed events; no timeline"));
    return nullptr;
  }
  double origin = std::numeric_limits<double>::infinity();
  std::map<int64_t, std::vector<const json*>> last;
  for (const auto& [rank, events] : per_rank) {
    if (events.size() % steps != 0) {
      warnings.push_back(str_cat(source, ": rank ", rank, " has ", events.size(),
                                 " events, not a multiple of the run's ", steps,
                                 " steps; no timeline"));
      return nullptr;
    }
    const size_t per_step = events.size() / steps;
    last[rank].assign(events.end() - per_step, events.end());
    for (const json* e : last[rank]) origin = std::min(origin, (*e)["ts"].get<double>());
  }
  json out = {{"ranks", json::array()}, {"events", json::array()}};
  for (const auto& [rank, events] : last) {
    out["ranks"].push_back(names.count(rank) ? names[rank] : "rank " + std::to_string(rank));
    for (const json* e : events) {
      const double start = ((*e)["ts"].get<double>() - origin) / 1e3;
      out["events"].push_back({{"rank", out["ranks"].size() - 1},
                               {"name", e->value("name", "")},
                               {"cat", e->value("cat", "")},
                               {"start_ms", start},
                               {"end_ms", start + (*e)["dur"].get<double>() / 1e3}});
    }
  }
  return out;
}

}  // namespace tessel::report
