// The planner's validation points: predicted against measured step time.
//
// The hook for `tessel plan` (being written separately): it, or a benchmark
// script, writes a JSON list of {"predicted_ms": .., "measured_ms": ..,
// "label": ".."} either to a file passed as `tessel report --plan-validation
// FILE` or as RUN_DIR/plan_validation.json. The report draws them as a
// scatter plot with the identity line. Entries without two positive numbers
// are skipped with a warning naming the entry.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::report {

// The valid points of `path`, each {"label", "predicted_ms", "measured_ms"}.
// A missing or unreadable file throws when `required`, else gives [] (no
// warning when absent, a warning when damaged).
nlohmann::json read_plan_validation(const std::string& path, bool required,
                                    std::vector<std::string>& warnings);

}  // namespace tessel::report
