// `tessel report RUN_DIR [RUN_DIR ...] [--out report.html]`: one offline HTML
// page with the runs' curves overlaid (src/tessel/report/, docs/report.md).
// Damaged or missing files are warnings (printed and shown on the page);
// the page is written from what is readable.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "commands.h"
#include "tessel/base/error.h"
#include "tessel/report/chart_library.h"
#include "tessel/report/plan_validation.h"
#include "tessel/report/report_data.h"
#include "tessel/report/report_page.h"
#include "tessel/report/run_data.h"

namespace tessel::cli {
namespace {

struct ReportOptions {
  std::vector<std::string> runs;
  std::string out = "report.html";
  std::string plan_validation;
  std::string chart_js;
};

int run_report(const ReportOptions& opt) {
  namespace fs = std::filesystem;
  // Everything that can stop the report is checked before anything is read.
  const std::string chart_js = report::read_chart_library(opt.chart_js);
  std::vector<report::RunData> runs;
  for (const std::string& dir : opt.runs) runs.push_back(report::read_run(dir));
  report::make_names_unique(runs);
  bool any = false;
  for (const report::RunData& r : runs) any |= r.has_data();
  if (!any) TS_THROW("report: none of the run directories holds anything readable");

  std::vector<std::string> plan_warnings;
  nlohmann::json points = nlohmann::json::array();
  if (!opt.plan_validation.empty())
    points = report::read_plan_validation(opt.plan_validation, true, plan_warnings);
  for (const std::string& dir : opt.runs)
    for (const nlohmann::json& p : report::read_plan_validation(
             (fs::path(dir) / "plan_validation.json").string(), false, plan_warnings))
      points.push_back(p);

  nlohmann::json data = report::report_data(runs, points);
  for (const std::string& w : plan_warnings) data["warnings"].push_back(w);
  for (const nlohmann::json& w : data["warnings"])
    std::fprintf(stderr, "tessel report: warning: %s\n", w.get<std::string>().c_str());
  const std::string html = report::report_html(data, chart_js);
  std::ofstream out(opt.out, std::ios::binary);
  if (!out || !(out << html) || !out.flush()) TS_THROW("report: cannot write '", opt.out, "'");
  std::printf("report: %s (%zu runs, %zu warnings)\n", opt.out.c_str(), runs.size(),
              data["warnings"].size());
  return 0;
}

}  // namespace

Command add_report_command(CLI::App& app) {
  auto opt = std::make_shared<ReportOptions>();
  CLI::App* sub = app.add_subcommand(
      "report", "write one offline HTML page with the curves of one or more run directories");
  sub->add_option("runs", opt->runs, "run directories (what `train --out` wrote)")->required();
  sub->add_option("--out", opt->out, "the HTML file to write (default report.html)");
  sub->add_option("--plan-validation", opt->plan_validation,
                  "JSON list of {\"predicted_ms\", \"measured_ms\", \"label\"} to draw as a "
                  "scatter (RUN_DIR/plan_validation.json is read too)");
  sub->add_option("--chart-js", opt->chart_js,
                  std::string("Chart.js file to inline (default ") + report::kDebianChartJs + ")");
  return {sub, [opt] { return run_report(*opt); }};
}

}  // namespace tessel::cli
