// `tessel report` on bad input: a missing directory or Chart.js is an error
// before anything is written; a damaged run is a warning and the page is
// still written from what is readable. (The browser test covers real runs.)
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/run_cli.h"
#include "common/test_dir.h"

namespace {

namespace fs = std::filesystem;

using Result = tessel::CliResult;

// `tessel report ARGS`.
Result report(const std::string& args) { return tessel::run_cli("report " + args); }

class ReportCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tessel::test_dir("tessel_report_cli");
    fs::create_directories(dir_ / "killed");
    // A killed run: two steps and half of a third, no summary or checkpoint.
    std::ofstream(dir_ / "killed" / "metrics.jsonl")
        << "{\"step\":0,\"loss\":5.5,\"lr\":0.001}\n{\"step\":1,\"loss\":5.0,\"lr\":0.002}\n"
           "{\"step\":2,\"lo";
    fs::create_directories(dir_ / "empty");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(ReportCli, MissingDirectoryIsAnErrorAndNothingIsWritten) {
  const Result r = report(path("killed") + " " + path("nope") + " --out " + path("r.html"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("run directory '" + path("nope") + "' does not exist"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(path("r.html")));
}

TEST_F(ReportCli, MissingChartJsNamesThePackage) {
  const Result r =
      report(path("killed") + " --chart-js " + path("none.js") + " --out " + path("r.html"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("libjs-chart.js"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(path("r.html")));
}

TEST_F(ReportCli, NothingReadableIsAnError) {
  const Result r = report(path("empty") + " --out " + path("r.html"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("none of the run directories holds anything readable"), std::string::npos)
      << r.output;
}

TEST_F(ReportCli, KilledAndEmptyRunsAreWarningsAndThePageIsWritten) {
  const Result r = report(path("killed") + " " + path("empty") + " --out " + path("r.html"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: " + path("killed") + "/metrics.jsonl line 3 is cut off"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(path("empty") + " has nothing readable"), std::string::npos) << r.output;
  std::ifstream in(path("r.html"));
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("line 3 is cut off (a killed run?)"), std::string::npos);
  EXPECT_NE(html.find("<td>killed</td>"), std::string::npos);
}

}  // namespace
