// The report's content as one JSON document: the header table's rows and
// every chart's series, built from the runs that were readable. The page
// (report_page.h) renders the table from it and embeds it for the charts.
//
// Shape: {"runs": [{"name", "dir", "header": {column: text}, "config_diff":
// {key: value}, "baseline", "series": {"loss"|"val_loss"|"lr"|"grad_norm"|
// "step_ms"|"tokens_per_s": [[step, value], ...]}, "comm": {axis: [[step,
// bytes], ...]}, "memory": [{"rank", "predicted", "measured", "rss"}],
// "bubble": [{"rank", "pipe", "measured", "schedule"}], "timeline"}],
// "columns": [...], "diff_keys": [...], "plan_validation": [...],
// "warnings": [...]}.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "tessel/report/run_data.h"

namespace tessel::report {

// `plan_points`: read_plan_validation's list (may be empty). Cross-run
// problems (different models or data) are added to `warnings`, after each
// run's own warnings.
nlohmann::json report_data(const std::vector<RunData>& runs, const nlohmann::json& plan_points);

}  // namespace tessel::report
