// `tessel plan` end to end on a synthetic profile (plan/synthetic_profile.h:
// nothing is measured): the message for more ranks than devices, the
// column legend, --explain's comparison of the best plan with the
// runner-up, the announcement before a first calibration, and the quick
// probe that compares a cached profile with the machine now. Contention is simulated through
// TESSEL_CONTENTION (plan/calibrate/contention.h), never by loading the machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/expect_cli_error.h"
#include "common/run_cli.h"
#include "common/test_dir.h"
#include "plan/synthetic_profile.h"
#include "tessel/plan/calibrate/calibrate.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;

class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test_dir("tessel_plan_cli"); }
  void TearDown() override { fs::remove_all(dir_); }

  // The synthetic profile, saved; `this_machine` gives it this machine's
  // CPU model and core count, so plan treats it as this machine's profile.
  std::string profile(bool this_machine = false, double fma_one_thread = 100) {
    MachineProfileData d = synthetic_profile_data();
    if (this_machine) {
      d.cpu_model = cpu_model_name();
      d.nproc = core_count();
    }
    d.fma_peak_gflops[0].gflops = fma_one_thread;
    const std::string path = (dir_ / "profile.json").string();
    MachineProfile(d, path).save(path);
    return path;
  }
  std::string busy_loadavg() {
    const std::string path = (dir_ / "loadavg").string();
    std::ofstream(path) << "9.50 8.00 7.00 12/300 4242\n";
    return path;
  }
  static std::string tiny() { return std::string(TESSEL_SOURCE_DIR) + "/examples/gpt-tiny.json"; }

  fs::path dir_;
};

TEST_F(PlanCli, MoreRanksThanCoresSaysWhatToDo) {
  const CliResult r = run_cli("plan --config " + tiny() + " --ranks 4 --profile " + profile());
  expect_error(r, "--oversubscribe");
  expect_error(r, "--ranks 2");
  expect_error(r, "--cluster");
}

TEST_F(PlanCli, TableIsFollowedByALegendOfEveryColumn) {
  const CliResult r =
      run_cli("plan --config " + tiny() + " --ranks 2 --top 3 --profile " + profile());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t legend = r.output.find("columns:");
  ASSERT_NE(legend, std::string::npos) << r.output;
  for (const char* column : {"mesh", "layout", "schedule", "v", "m", "zero", "recompute", "step ms",
                             "tokens/s", "TFLOP/s", "peak", "memory", "bubble", "exposed comm"})
    EXPECT_NE(r.output.find(std::string("\n  ") + column + " ", legend), std::string::npos)
        << "no legend line for '" << column << "' in:\n"
        << r.output;
}

// A flag for a key the search does not choose (--offload, --device) is in
// every plan's command, so the command trains what was planned.
TEST_F(PlanCli, OffloadGivenAsAFlagTravelsWithEachPlansCommand) {
  const CliResult r = run_cli("plan --config " + tiny() +
                              " --ranks 1 --top 2 --offload activations --profile " + profile());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t commands = r.output.find("commands:");
  ASSERT_NE(commands, std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1: tessel train", commands), std::string::npos) << r.output;
  for (const char* n : {"1: ", "2: "}) {
    const size_t at = r.output.find(std::string("\n  ") + n + "tessel train", commands);
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string line = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find("--set offload=activations"), std::string::npos) << line;
  }
}

TEST_F(PlanCli, ExplainSaysWhenTheBestAndTheRunnerUpTie) {
  // gpt-tiny on data=2 without recomputation or accumulation: ZeRO 0 (4.88
  // MiB) does not fit 4.5 MiB, and ZeRO 1 and 2 predict the same step and
  // peak (4.17 MiB).
  const std::string args = "plan --config " + tiny() +
                           " --ranks 2 --mesh data=2 --microbatches 1 --recompute none "
                           "--memory-limit 4.5MiB "
                           "--explain --profile " +
                           profile();
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("0.00 ms faster"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("why: the best and the runner-up tie at"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the same memory too"), std::string::npos) << r.output;
  // Without the limit, ZeRO 0 is faster: the difference has digits to spare.
  const CliResult d =
      run_cli(args.substr(0, args.find(" --memory-limit")) + " --explain --profile " + profile());
  ASSERT_EQ(d.exit_code, 0) << d.output;
  // A difference in ms with three digits, not 0.000 (the test profile's figures).
  const size_t why = d.output.find("why: the best is 0.");
  ASSERT_NE(why, std::string::npos) << d.output;
  EXPECT_NE(d.output.substr(why, 26), "why: the best is 0.000 ms ") << d.output;
  EXPECT_NE(d.output.find("%) faster"), std::string::npos) << d.output;
}

TEST_F(PlanCli, FirstPlanAnnouncesTheCalibrationAndHowToSkipIt) {
  // No cached profile: plan says first that it calibrates, how long, where
  // it caches the profile and how to skip it. The simulated load then stops
  // the calibration before it measures anything (timeout: the unfixed
  // command calibrated for a minute).
  const std::string cache = (dir_ / "cache").string();
  const CliResult r = run_cli(
      "plan --config " + tiny() + " --ranks 1",
      "XDG_CACHE_HOME=" + cache + " TESSEL_CONTENTION=loadavg=" + busy_loadavg() + " timeout 60");
  EXPECT_NE(r.output.find("calibrating this machine"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(cache + "/tessel/profile-"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--profile"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--cluster"), std::string::npos) << r.output;
  expect_error(r, "busy");
  EXPECT_FALSE(fs::exists(cache + "/tessel")) << "a profile was cached on a busy machine";
}

TEST_F(PlanCli, ProfileThatDisagreesWithAQuickProbeIsFlagged) {
  const std::string args = "plan --config " + tiny() + " --ranks 1 --top 1 --profile ";
  // The probe (simulated) finds 40 GFLOP/s where the profile says 100.
  const CliResult slow =
      run_cli(args + profile(/*this_machine=*/true), "TESSEL_CONTENTION=probe_gflops=40");
  ASSERT_EQ(slow.exit_code, 0) << slow.output;
  EXPECT_NE(slow.output.find("does not match this machine now"), std::string::npos) << slow.output;
  EXPECT_NE(slow.output.find("tessel calibrate"), std::string::npos) << slow.output;
  // Within the threshold: no warning.
  const CliResult close =
      run_cli(args + profile(/*this_machine=*/true), "TESSEL_CONTENTION=probe_gflops=95");
  ASSERT_EQ(close.exit_code, 0) << close.output;
  EXPECT_EQ(close.output.find("does not match"), std::string::npos) << close.output;
  // Another machine's profile is not probed.
  const CliResult other = run_cli(args + profile(), "TESSEL_CONTENTION=probe_gflops=40");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_EQ(other.output.find("does not match"), std::string::npos) << other.output;
}

// Published runs as inputs (plan/published_run.h, docs/planner.md).
std::string gpt3() {
  return std::string(TESSEL_SOURCE_DIR) + "/examples/published/megatron-gpt3-175b-1024-a100.json";
}

TEST_F(PlanCli, APublishedRunComparesItsPredictionWithThePublishedThroughputAndMemory) {
  // GPUs and cluster from the block: neither --ranks nor --cluster given.
  const CliResult r = run_cli("plan --config " + gpt3() + " --compare-published");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"published run: Megatron-LM GPT-3 175B", "--mesh pipe=8,data=16,model=8",
                           "--microbatches 96 --schedule interleaved --chunks ",
                           "--recompute blocks", "searched, not stated: layout, chunks",
                           "published 31.47 s (140.0 TFLOP/s per GPU", "the device has 80.00 GiB"})
    EXPECT_NE(r.output.find(text), std::string::npos) << text << " in:\n" << r.output;
  const CliResult j = run_cli("plan --config " + gpt3() + " --compare-published --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const nlohmann::json out = nlohmann::json::parse(j.output.substr(j.output.find('{')));
  EXPECT_NEAR(out["published"]["step_s"].get<double>(), 31.47, 0.01);
  const nlohmann::json& pred = out["predicted"];
  EXPECT_NEAR(pred["error"].get<double>(),
              pred["step_s"].get<double>() / out["published"]["step_s"].get<double>() - 1, 1e-12);
  EXPECT_EQ(pred["device_memory_bytes"].get<int64_t>(), int64_t{80} << 30);
  EXPECT_EQ(pred["fits"].get<bool>(),
            pred["peak_bytes"].get<int64_t>() <= pred["device_memory_bytes"].get<int64_t>());
  EXPECT_EQ(pred["plan"]["mesh"], "pipe=8,data=16,model=8");
}

TEST_F(PlanCli, TheCommandLineOverridesThePublishedKnobsAndFreeSearchesThem) {
  const std::string base =
      "plan --config " + gpt3() + " --ignore-device-memory --top 1 --mesh pipe=16,data=8,model=8";
  const CliResult r = run_cli(base + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json plan =
      nlohmann::json::parse(r.output.substr(r.output.find('{')))["plans"][0];
  EXPECT_EQ(plan["mesh"], "pipe=16,data=8,model=8");  // the command line's
  EXPECT_EQ(plan["microbatches"], 96);                // the block's
  EXPECT_EQ(plan["schedule"], "interleaved");
  EXPECT_EQ(plan["recompute"], "blocks");
  // A mesh whose data ranks hold fewer rows than the published micro-batch
  // count (1536 / 128 = 12): the count is searched instead.
  const CliResult other =
      run_cli("plan --config " + gpt3() +
              " --ignore-device-memory --top 1 --mesh pipe=8,data=128 --schedule 1f1b --json");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  const nlohmann::json p2 =
      nlohmann::json::parse(other.output.substr(other.output.find('{')))["plans"][0];
  EXPECT_EQ(12 % p2["microbatches"].get<int>(), 0) << p2;
  const CliResult table = run_cli(base + " --microbatches 96");
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_NE(table.output.find("its stated knobs taken where the command line gives none); "
                              "searched: layout, chunks\n"),
            std::string::npos)
      << table.output;
  const CliResult free = run_cli(base + " --microbatches 96 --free");
  ASSERT_EQ(free.exit_code, 0) << free.output;
  EXPECT_NE(free.output.find("searched: layout, schedule, chunks, zero, recompute\n"),
            std::string::npos)
      << free.output;
}

TEST_F(PlanCli, APlanThatFitsNowhereNamesTheSmallestPeakAndTheKnobs) {
  // 175B on 1,024 GPUs in 1 GiB: nothing fits.
  const CliResult r = run_cli("plan --config " + gpt3() + " --memory-limit 1GiB");
  expect_error(r, "fits 1.00 GiB per rank (--memory-limit)");
  expect_error(r, "the smallest peak is ");
  expect_error(r, " GiB, ");  // sizes in GiB, not thousands of MiB
  expect_error(r, "more pipeline stages or tensor parallelism");
  expect_error(r, "(fixed in this request: --mesh)");
  expect_error(r, "a smaller context (2048 now)");
  // The published plan recomputes every block with micro-batches of one sequence.
  expect_error(r, "It already recomputes every block and runs micro-batches of one sequence.");
  expect_error(r, "raise --memory-limit");
  expect_error(r, "--free searches every knob");
  // The device's limit: the way to see the plans anyway.
  const CliResult d =
      run_cli("plan --config " + gpt3() + " --recompute none --zero 0 --offload none");
  expect_error(d, "(the device's memory)");
  expect_error(d, "recomputation (--recompute blocks");
  expect_error(d, "offload (--offload optimizer,weights,activations");
  expect_error(d, "(fixed in this request: --offload)");
  expect_error(d, "--ignore-device-memory");
}

// Without recomputation the published 175B plan does not fit an 80 GiB A100;
// with offload searched (nothing fits without it) its plans do, and their
// commands say which offload.
TEST_F(PlanCli, OffloadIsSearchedWhereNothingElseFitsTheDevice) {
  const CliResult r = run_cli("plan --config " + gpt3() + " --recompute none --zero 0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  ASSERT_FALSE(j["plans"].empty());
  for (const nlohmann::json& p : j["plans"]) {
    EXPECT_LE(p["peak_bytes"].get<int64_t>(), int64_t{80} << 30) << p["command"];
    EXPECT_NE(p["command"].get<std::string>().find("--set offload="), std::string::npos)
        << p["command"];
  }
}

TEST_F(PlanCli, PublishedOnlyFlagsNeedAPublishedRunAndRanksAreRequiredWithoutOne) {
  expect_error(
      run_cli("plan --config " + tiny() + " --ranks 1 --compare-published --profile " + profile()),
      "--compare-published needs a config with a 'published' block");
  expect_error(run_cli("plan --config " + tiny() + " --profile " + profile()), "give --ranks N");
  expect_error(run_cli("train --config " + gpt3() + " --steps 1"),
               "an input of `tessel plan --config` only");
}

}  // namespace
}  // namespace tessel::plan
