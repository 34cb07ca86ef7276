// Reading run directories tolerantly (src/tessel/report/run_data.h): a killed
// run's truncated metrics, a directory without metrics, damaged JSON and runs
// of different models give warnings naming the file, and what is readable
// still reaches the report data.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/error_of.h"
#include "common/test_dir.h"
#include "tessel/report/config_diff.h"
#include "tessel/report/plan_validation.h"
#include "tessel/report/report_data.h"
#include "tessel/report/run_data.h"
#include "tessel/report/trace_step.h"

namespace tessel::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class RunReader : public ::testing::Test {
 protected:
  void SetUp() override { root_ = tessel::test_dir("tessel_report"); }
  void TearDown() override { fs::remove_all(root_); }

  // A run directory with the given files (name -> content).
  std::string make_run(const std::string& name, const std::map<std::string, std::string>& files) {
    const fs::path dir = root_ / name;
    fs::create_directories(dir / "checkpoint");
    for (const auto& [file, text] : files) std::ofstream(dir / file) << text;
    return dir.string();
  }
  static std::string manifest(const json& config) {
    return json{{"format", "tessel-checkpoint"}, {"config", config}}.dump();
  }
  static std::string has_warning(const std::vector<std::string>& warnings,
                                 const std::string& needle) {
    for (const std::string& w : warnings)
      if (w.find(needle) != std::string::npos) return w;
    return "";
  }

  fs::path root_;
};

const char* kTwoSteps =
    "{\"step\":0,\"loss\":5.5,\"lr\":0.001,\"grad_norm\":2,\"step_ms\":10,\"tokens_per_s\":100}\n"
    "{\"step\":1,\"loss\":5.0,\"lr\":0.002,\"grad_norm\":1.5,\"step_ms\":9,\"tokens_per_s\":110,"
    "\"val_loss\":5.1,\"comm\":{\"data\":{\"all_reduce\":{\"calls\":2,\"bytes\":4096}}}}\n";

TEST_F(RunReader, TruncatedMetricsKeepTheStepsBeforeTheCut) {
  const std::string dir =
      make_run("killed", {{"metrics.jsonl", std::string(kTwoSteps) + "{\"step\":2,\"loss\":4."}});
  const RunData run = read_run(dir);
  ASSERT_EQ(run.steps.size(), 2u);
  EXPECT_EQ(run.steps[1]["loss"], 5.0);
  EXPECT_NE(has_warning(run.warnings, "line 3 is cut off (a killed run?)"), "");
  // No summary: a warning, and the final losses come from the metrics.
  EXPECT_NE(has_warning(run.warnings, "summary.json (the run did not finish?)"), "");
  const json data = report_data({run}, json::array());
  const json& header = data["runs"][0]["header"];
  EXPECT_EQ(header["final loss"], "5.0000");
  EXPECT_EQ(header["final val loss"], "5.1000");
  EXPECT_EQ(data["runs"][0]["series"]["loss"].size(), 2u);
  // Only steps that record collectives are points (step 0 has no "comm").
  EXPECT_EQ(data["runs"][0]["comm"]["data"], json::parse("[[1, 4096.0]]"));
}

TEST_F(RunReader, DamagedLineInTheMiddleIsSkippedNamingItsLine) {
  std::vector<std::string> warnings;
  const auto steps =
      parse_metrics("{\"step\":0,\"loss\":1}\nnot json\n{\"loss\":2}\n{\"step\":3,\"loss\":3}\n",
                    "m.jsonl", warnings);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[1]["step"], 3);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0], "m.jsonl line 2 is not a JSON object; skipped");
  EXPECT_EQ(warnings[1], "m.jsonl line 3 has no numeric \"step\"; skipped");
}

TEST_F(RunReader, RunWithoutMetricsStillGivesItsHeader) {
  const std::string dir =
      make_run("no_metrics",
               {{"summary.json",
                 json{{"mesh", "data=2"}, {"final_loss", 2.5}, {"baseline_loss", 3.25}}.dump()}});
  const RunData run = read_run(dir);
  EXPECT_TRUE(run.steps.empty());
  EXPECT_TRUE(run.has_data());
  EXPECT_NE(has_warning(run.warnings, "metrics.jsonl: no curves for this run"), "");
  EXPECT_NE(has_warning(run.warnings, "manifest.json: the config is unknown"), "");
  const json data = report_data({run}, json::array());
  EXPECT_EQ(data["runs"][0]["header"]["mesh"], "data=2");
  EXPECT_EQ(data["runs"][0]["header"]["final loss"], "2.5000");
  EXPECT_EQ(data["runs"][0]["baseline"], 3.25);
}

TEST_F(RunReader, EmptyDirectoryHasNothingAndMissingDirectoryIsAnError) {
  const std::string dir = make_run("empty", {});
  const RunData run = read_run(dir);
  EXPECT_FALSE(run.has_data());
  EXPECT_NE(has_warning(run.warnings, "has nothing readable"), "");
  EXPECT_NE(error_of([&] { read_run((root_ / "absent").string()); }).find("does not exist"),
            std::string::npos);
  std::ofstream(root_ / "file") << "x";
  EXPECT_NE(error_of([&] { read_run((root_ / "file").string()); }).find("is not a directory"),
            std::string::npos);
}

TEST_F(RunReader, DamagedSummaryIsAWarning) {
  const std::string dir =
      make_run("bad_summary", {{"metrics.jsonl", kTwoSteps}, {"summary.json", "{\"mesh\": "}});
  const RunData run = read_run(dir);
  EXPECT_TRUE(run.summary.is_null());
  EXPECT_NE(has_warning(run.warnings, "summary.json is not a JSON object (damaged?)"), "");
}

TEST_F(RunReader, DifferentModelsAreFlaggedAndTheirConfigDifferencesShown) {
  json gpt = {{"model", "gpt"}, {"data", "fortunes"}, {"lr", 0.001}, {"mesh", ""}};
  json mlp = {{"model", "mlp"},
              {"data", "fashion-mnist"},
              {"lr", 0.001},
              {"mesh", "data=2"},
              {"hidden", 64}};
  const RunData a = read_run(
      make_run("gpt", {{"metrics.jsonl", kTwoSteps}, {"checkpoint/manifest.json", manifest(gpt)}}));
  const RunData b = read_run(
      make_run("mlp", {{"metrics.jsonl", kTwoSteps}, {"checkpoint/manifest.json", manifest(mlp)}}));
  const json data = report_data({a, b}, json::array());
  std::vector<std::string> warnings = data["warnings"];
  EXPECT_NE(has_warning(warnings, "the runs train different models (gpt, mlp)"), "");
  EXPECT_NE(has_warning(warnings, "the runs read different data (fashion-mnist, fortunes)"), "");
  // mesh has its own column; lr is equal; hidden is missing from one.
  EXPECT_EQ(data["diff_keys"], json({"data", "hidden", "model"}));
  EXPECT_EQ(data["runs"][0]["config_diff"]["hidden"], "(unset)");
  EXPECT_EQ(data["runs"][1]["header"]["mesh"], "data=2");
}

// Steps have one column: the steps run, and the config's where they differ
// (a run stopped early); the config key is not repeated among the differences.
TEST_F(RunReader, StepsHaveOneColumnWithTheConfiguredCountWhereItDiffers) {
  json full = {{"model", "gpt"}, {"steps", 2}};
  json longer = {{"model", "gpt"}, {"steps", 100}};
  const RunData a = read_run(make_run(
      "full", {{"metrics.jsonl", kTwoSteps}, {"checkpoint/manifest.json", manifest(full)}}));
  const RunData b = read_run(make_run(
      "stopped", {{"metrics.jsonl", kTwoSteps}, {"checkpoint/manifest.json", manifest(longer)}}));
  const json data = report_data({a, b}, json::array());
  int steps_columns = 0;
  for (const json& c : data["columns"]) steps_columns += c == "steps";
  EXPECT_EQ(steps_columns, 1);
  EXPECT_EQ(data["diff_keys"], json::array());
  EXPECT_EQ(data["runs"][0]["header"]["steps"], "2");
  EXPECT_EQ(data["runs"][1]["header"]["steps"], "2 of 100");
}

// A resumed run's marked lines become its restarts column; without any
// resumed run there is no such column.
TEST_F(RunReader, RestartsAreListedWhereARunWasResumed) {
  const std::string resumed =
      std::string(kTwoSteps) +
      "{\"step\":2,\"loss\":4.8,\"resumed\":{\"mesh\":\"data=2\",\"layout\":\"batch=data\"}}\n";
  const RunData plain = read_run(make_run("plain", {{"metrics.jsonl", kTwoSteps}}));
  const RunData again = read_run(make_run("again", {{"metrics.jsonl", resumed}}));
  json columns = report_data({plain}, json::array())["columns"];
  EXPECT_EQ(std::count(columns.begin(), columns.end(), json("restarts")), 0);
  const json data = report_data({plain, again}, json::array());
  columns = data["columns"];
  EXPECT_EQ(std::count(columns.begin(), columns.end(), json("restarts")), 1);
  EXPECT_EQ(data["runs"][0]["header"]["restarts"], "");
  EXPECT_EQ(data["runs"][1]["header"]["restarts"], "step 2 on data=2");
}

TEST_F(RunReader, RepeatedDirectoryNamesAreNamedByPath) {
  std::vector<RunData> runs = {read_run(make_run("a/run", {{"metrics.jsonl", kTwoSteps}})),
                               read_run(make_run("b/run", {{"metrics.jsonl", kTwoSteps}})),
                               read_run(make_run("c", {{"metrics.jsonl", kTwoSteps}}))};
  EXPECT_EQ(runs[0].name, "run");
  make_names_unique(runs);
  EXPECT_EQ(runs[0].name, (root_ / "a/run").string());
  EXPECT_EQ(runs[1].name, (root_ / "b/run").string());
  EXPECT_EQ(runs[2].name, "c");
}

TEST(ConfigDiff, OneKnownConfigHasNothingToCompare) {
  EXPECT_TRUE(differing_keys({json{{"lr", 1}}, json()}, {}).empty());
  EXPECT_EQ(differing_keys({json{{"lr", 1}}, json{{"lr", 2}}, json()}, {}),
            std::vector<std::string>{"lr"});
}

TEST(TraceStep, LastStepIsEachRanksLastShareOfEvents) {
  json events = json::array();
  events.push_back(
      {{"ph", "M"}, {"name", "thread_name"}, {"tid", 0}, {"args", {{"name", "rank 0 (pipe 0)"}}}});
  for (int step = 0; step < 2; ++step)
    for (int k = 0; k < 3; ++k)
      events.push_back({{"ph", "X"},
                        {"name", k == 2 ? "step" : "F mb0 s0"},
                        {"cat", "compute"},
                        {"tid", 0},
                        {"ts", 1000.0 * (10 * step + k)},
                        {"dur", 500.0}});
  std::vector<std::string> warnings;
  const json t = last_step_timeline({{"traceEvents", events}}, 2, "t.json", warnings);
  ASSERT_TRUE(t.is_object()) << (warnings.empty() ? "" : warnings[0]);
  EXPECT_EQ(t["ranks"], json({"rank 0 (pipe 0)"}));
  ASSERT_EQ(t["events"].size(), 3u);
  EXPECT_EQ(t["events"][0]["start_ms"], 0.0);
  EXPECT_EQ(t["events"][2]["end_ms"], 2.5);
  EXPECT_TRUE(last_step_timeline({{"traceEvents", events}}, 4, "t.json", warnings).is_null());
  EXPECT_NE(warnings.back().find("6 events, not a multiple of the run's 4 steps"),
            std::string::npos);
}

TEST_F(RunReader, PlanValidationSkipsBadEntriesAndRequiredFileMustExist) {
  const fs::path path = root_ / "plan.json";
  std::ofstream(path) << R"([{"predicted_ms": 10, "measured_ms": 12, "label": "data=2"},
                             {"predicted_ms": "x", "measured_ms": 3}])";
  std::vector<std::string> warnings;
  const json points = read_plan_validation(path.string(), true, warnings);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0]["label"], "data=2");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("entry 1 needs positive numbers"), std::string::npos);
  EXPECT_TRUE(read_plan_validation((root_ / "none.json").string(), false, warnings).empty());
  EXPECT_NE(error_of([&] {
              read_plan_validation((root_ / "none.json").string(), true, warnings);
            }).find("cannot open --plan-validation file"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::report
