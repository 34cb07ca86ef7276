// The charting library the report inlines: Chart.js from Debian's
// libjs-chart.js, read when the report is written so the page works offline.
#pragma once

#include <string>

namespace tessel::report {

// Debian's path of the minified UMD build (defines the global `Chart`).
inline constexpr const char* kDebianChartJs = "/usr/share/javascript/chart.js/chart.min.js";

// The library's text from `path` ("" = kDebianChartJs, or $TESSEL_CHART_JS
// when set). Throws naming the path and the package when it is missing or
// does not look like Chart.js.
std::string read_chart_library(const std::string& path);

}  // namespace tessel::report
