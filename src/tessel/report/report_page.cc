#include "tessel/report/report_page.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "tessel/base/error.h"

namespace tessel::report {
namespace {

using nlohmann::json;

// `text` with each character a replacement names replaced by its text.
std::string replace_chars(const std::string& text,
                          std::initializer_list<std::pair<char, const char*>> replacements) {
  std::string out;
  for (char c : text) {
    auto r = std::find_if(replacements.begin(), replacements.end(),
                          [c](const auto& pair) { return pair.first == c; });
    if (r == replacements.end())
      out += c;
    else
      out += r->second;
  }
  return out;
}

constexpr const char* kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 16px 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 8px; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; font-size: 13px; }
th { background: #f2f2f2; }
.warnings { background: #fff4e0; border: 1px solid #e0b060; padding: 6px 12px; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
.card { border: 1px solid #ddd; border-radius: 4px; padding: 8px; }
.card h2 { font-size: 15px; margin: 0 0 4px; }
.card p { font-size: 12px; color: #555; margin: 0 0 6px; }
.card .plot { position: relative; height: 300px; }
)";

// Text safe inside HTML elements and attribute values.
std::string html_escape(const std::string& text) {
  return replace_chars(
      text, {{'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}});
}

// JSON text safe inside a <script> element: every '<', '>' and '&' is
// written as a \u escape, so no "</script>" or "<!--" can appear.
std::string json_for_script(const json& value) {
  return replace_chars(value.dump(-1, ' ', false, json::error_handler_t::replace),
                       {{'<', "\\u003c"}, {'>', "\\u003e"}, {'&', "\\u0026"}});
}

std::string header_table(const json& data) {
  std::string html = "<table id=\"runs\"><tr>";
  for (const json& c : data["columns"])
    html += "<th>" + html_escape(c.get<std::string>()) + "</th>";
  for (const json& k : data["diff_keys"])
    html += "<th>" + html_escape(k.get<std::string>()) + "</th>";
  html += "</tr>\n";
  for (const json& run : data["runs"]) {
    html += "<tr title=\"" + html_escape(run["dir"].get<std::string>()) + "\">";
    for (const json& c : data["columns"])
      html += "<td>" + html_escape(run["header"].value(c.get<std::string>(), "")) + "</td>";
    for (const json& k : data["diff_keys"]) {
      const json& v = run["config_diff"][k.get<std::string>()];
      html += "<td>" + html_escape(v.is_string() ? v.get<std::string>() : v.dump()) + "</td>";
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

}  // namespace

std::string report_html(const json& data, const std::string& chart_js) {
  // The library goes in verbatim; a closing tag inside it would end the
  // element early, so refuse rather than emit a broken page.
  if (chart_js.find("</script") != std::string::npos ||
      chart_js.find("</SCRIPT") != std::string::npos)
    TS_THROW("report: the Chart.js text contains '</script'; cannot inline it");
  std::string names;
  for (const json& run : data["runs"])
    names += (names.empty() ? "" : " vs ") + run["name"].get<std::string>();
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>Tessel report: " +
      html_escape(names) + "</title>\n<style>" + kStyle +
      "</style>\n"
      // First script: record errors (the browser test reads them back).
      "<script>window.tesselErrors = [];\n"
      "window.addEventListener('error', e => tesselErrors.push(String(e.message)));\n"
      "const tesselConsoleError = console.error;\n"
      "console.error = (...a) => { tesselErrors.push(a.join(' ')); tesselConsoleError(...a); };\n"
      "</script>\n<script>\n" +
      chart_js + "\n</script>\n</head>\n<body>\n<h1>Tessel report: " + html_escape(names) +
      "</h1>\n";
  if (!data["warnings"].empty()) {
    html += "<div class=\"warnings\"><b>Warnings</b> (the report shows what was readable)<ul>\n";
    for (const json& w : data["warnings"])
      html += "<li>" + html_escape(w.get<std::string>()) + "</li>\n";
    html += "</ul></div>\n";
  }
  html += header_table(data);
  html += "<div class=\"grid\" id=\"charts\"></div>\n";
  html += "<pre id=\"tessel-selfcheck\" hidden></pre>\n";
  html += "<script type=\"application/json\" id=\"tessel-data\">" + json_for_script(data) +
          "</script>\n<script>\n" + report_script() + "\n</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace tessel::report
