// `tessel plan` end to end on a synthetic profile (plan/synthetic_profile.h:
// nothing is measured): the message for more ranks than devices, the
// column legend, --explain's comparison of the best plan with the
// runner-up, the announcement before a first calibration, and the quick
// probe that compares a cached profile with the machine now (issue 34:
// 5 and 9). Contention is simulated through TESSEL_CONTENTION
// (plan/contention.h), never by loading the machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/expect_cli_error.h"
#include "common/run_cli.h"
#include "common/test_dir.h"
#include "plan/synthetic_profile.h"
#include "tessel/plan/calibrate.h"

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

TEST_F(PlanCli, ExplainSaysWhenTheBestAndTheRunnerUpTie) {
  // gpt-tiny on data=2 without recomputation: ZeRO 0 (5.19 MiB) does not fit
  // 5 MiB, and ZeRO 1 and 2 predict the same step and peak (4.38 MiB).
  const std::string args = "plan --config " + tiny() +
                           " --ranks 2 --mesh data=2 --recompute none --memory-limit 5MiB "
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

}  // namespace
}  // namespace tessel::plan
