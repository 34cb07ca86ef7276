// The report as one self-contained HTML page: a header table rendered here,
// the report data embedded as JSON, Chart.js and the chart script inlined.
// Nothing is fetched when the page is opened.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace tessel::report {

// `data`: report_data's document; `chart_js`: read_chart_library's text.
std::string report_html(const nlohmann::json& data, const std::string& chart_js);

// The chart-drawing script (report_script.cc).
const char* report_script();

}  // namespace tessel::report
