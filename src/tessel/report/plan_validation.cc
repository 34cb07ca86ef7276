#include "tessel/report/plan_validation.h"

#include <fstream>

#include "tessel/base/error.h"

namespace tessel::report {

using nlohmann::json;

json read_plan_validation(const std::string& path, bool required,
                          std::vector<std::string>& warnings) {
  json points = json::array();
  std::ifstream in(path);
  if (!in) {
    if (required) TS_THROW("report: cannot open --plan-validation file '", path, "'");
    return points;
  }
  json list = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_array()) {
    const std::string message =
        str_cat("plan validation file '", path,
                "' is not a JSON list of {\"predicted_ms\", \"measured_ms\", \"label\"}");
    if (required) TS_THROW("report: ", message);
    warnings.push_back(message + "; ignored");
    return points;
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const json& e = list[i];
    const bool ok = e.is_object() && e.contains("predicted_ms") && e["predicted_ms"].is_number() &&
                    e.contains("measured_ms") && e["measured_ms"].is_number() &&
                    e["predicted_ms"].get<double>() > 0 && e["measured_ms"].get<double>() > 0;
    if (!ok) {
      warnings.push_back(str_cat(path, " entry ", i,
                                 " needs positive numbers \"predicted_ms\" and \"measured_ms\"; "
                                 "skipped"));
      continue;
    }
    std::string label = "point " + std::to_string(i);
    if (e.contains("label") && e["label"].is_string()) label = e["label"].get<std::string>();
    points.push_back({{"label", label},
                      {"predicted_ms", e["predicted_ms"].get<double>()},
                      {"measured_ms", e["measured_ms"].get<double>()}});
  }
  return points;
}

}  // namespace tessel::report
