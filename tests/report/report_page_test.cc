// The report page (src/tessel/report/report_page.h): text from run
// directories can never end a <script> element or inject markup, and a
// missing Chart.js is a clear error naming the Debian package.
#include "tessel/report/report_page.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error_of.h"
#include "tessel/report/chart_library.h"
#include "tessel/report/report_data.h"

namespace tessel::report {
namespace {

using nlohmann::json;

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(ReportPage, HostileTextStaysInsideItsElement) {
  RunData run;
  run.dir = "runs/<b>x";
  run.name = "</script><script>alert(1)</script>";
  run.steps.push_back({{"step", 0}, {"loss", 1.0}});
  run.warnings.push_back("bad </script> & <!-- warning");
  const json data = report_data({run}, json::array());
  const std::string html = report_html(data, "window.Chart = function () {};");
  // Exactly our four script elements close: error hook, library, data, chart script.
  EXPECT_EQ(count(html, "</script>"), 4u);
  EXPECT_EQ(count(html, "<!--"), 0u);
  EXPECT_NE(html.find("&lt;/script&gt;&lt;script&gt;alert(1)"), std::string::npos);  // the table
  EXPECT_NE(html.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
  EXPECT_NE(html.find("bad &lt;/script&gt; &amp; &lt;!-- warning"), std::string::npos);
  // The embedded JSON parses back to the same data.
  const size_t start = html.find("id=\"tessel-data\">") + 17;
  const size_t end = html.find("</script>", start);
  EXPECT_EQ(json::parse(html.substr(start, end - start)), data);
}

TEST(ReportPage, LibraryThatWouldCloseTheScriptIsRefused) {
  EXPECT_NE(error_of([] {
              report_html(report_data({}, json::array()), "x = '</script>';");
            }).find("contains '</script'"),
            std::string::npos);
}

TEST(ReportPage, MissingChartJsNamesThePackage) {
  const std::string message = error_of([] { read_chart_library("/nonexistent/chart.min.js"); });
  EXPECT_NE(message.find("'/nonexistent/chart.min.js'"), std::string::npos) << message;
  EXPECT_NE(message.find("libjs-chart.js"), std::string::npos) << message;
}

}  // namespace
}  // namespace tessel::report
