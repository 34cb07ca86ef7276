// The page's chart script, report_charts.js (in this folder), which the
// build embeds as a string literal: it reads the embedded report data
// (report_data.h) and draws each chart with Chart.js. Charts whose data no
// run has are left out. At the end it writes a self-check into
// #tessel-selfcheck (each canvas's count of drawn and of coloured pixels,
// and any errors), which the browser test reads back.
#include "tessel/report/report_page.h"

namespace tessel::report {

const char* report_script() {
  return
#include "report_charts.js.inc"
      ;
}

}  // namespace tessel::report
