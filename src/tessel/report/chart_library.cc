#include "tessel/report/chart_library.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "tessel/base/error.h"

namespace tessel::report {

std::string read_chart_library(const std::string& path_arg) {
  std::string path = path_arg;
  if (path.empty()) {
    const char* env = std::getenv("TESSEL_CHART_JS");
    path = env && *env ? env : kDebianChartJs;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in)
    TS_THROW("report: cannot read the Chart.js library at '", path,
             "' (install Debian's libjs-chart.js: apt-get install libjs-chart.js, or run "
             "scripts/install-deps.sh)");
  const std::string js((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (js.find("Chart") == std::string::npos)
    TS_THROW("report: '", path, "' does not look like Chart.js (no 'Chart' in it)");
  return js;
}

}  // namespace tessel::report
