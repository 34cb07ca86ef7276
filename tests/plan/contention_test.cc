// Contention checks of calibrate and plan (plan/calibrate/contention.h):
// the load rule, the spread of repeated probes, the probe/profile mismatch
// and TESSEL_CONTENTION. Nothing here loads or measures the machine.
#include "tessel/plan/calibrate/contention.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error_of.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;

TEST(Contention, LoadBeyondTheCoresCalibrateLeavesFreeIsBusy) {
  // Calibrating on both of 2 cores: before (own load 0) quiet up to 0.5.
  EXPECT_EQ(busy_by_load(0.3, 0, 2, 2, 0.5), "");
  const std::string busy = busy_by_load(9.5, 0, 2, 2, 0.5);
  EXPECT_NE(busy.find("load 9.50"), std::string::npos) << busy;
  EXPECT_NE(busy.find("2 cores"), std::string::npos) << busy;
  // After: calibrate's own 2 threads are not contention.
  EXPECT_EQ(busy_by_load(2.4, 2, 2, 2, 0.5), "");
  EXPECT_NE(busy_by_load(4.0, 2, 2, 2, 0.5), "");
  // Calibrating on 1 of 4 cores leaves 3 free.
  EXPECT_EQ(busy_by_load(3.2, 0, 1, 4, 0.5), "");
  EXPECT_NE(busy_by_load(3.6, 0, 1, 4, 0.5), "");
}

TEST(Contention, SpreadIsTheLargestOverTheSmallestRepeat) {
  EXPECT_DOUBLE_EQ(spread_of({100, 80, 90}), 0.25);
  EXPECT_DOUBLE_EQ(spread_of({100}), 0);
  EXPECT_DOUBLE_EQ(spread_of({}), 0);
}

TEST(Contention, ProbeFarFromTheProfileIsAMismatch) {
  EXPECT_EQ(probe_mismatch(95, 100, 0.2, "p.json"), "");
  EXPECT_EQ(probe_mismatch(119, 100, 0.2, "p.json"), "");
  const std::string slow = probe_mismatch(40, 100, 0.2, "p.json");
  EXPECT_NE(slow.find("p.json"), std::string::npos) << slow;
  EXPECT_NE(slow.find("tessel calibrate"), std::string::npos) << slow;
  EXPECT_NE(probe_mismatch(130, 100, 0.2, "p.json"), "");
}

TEST(Contention, LoadAverageIsReadFromTheFile) {
  const fs::path file = fs::temp_directory_path() / ("tessel_loadavg_" + std::to_string(getpid()));
  std::ofstream(file) << "7.25 6.00 5.00 3/200 99\n";
  EXPECT_EQ(read_load_average(file.string()), 7.25);
  fs::remove(file);
  EXPECT_EQ(read_load_average(file.string()), std::nullopt);
}

TEST(Contention, EnvironmentOverridesTheSettings) {
  setenv("TESSEL_CONTENTION", "loadavg=/tmp/l,spread=0.5,mismatch=0.3,probe_gflops=42", 1);
  const ContentionSettings s = contention_settings();
  EXPECT_EQ(s.loadavg, "/tmp/l");
  EXPECT_DOUBLE_EQ(s.spread, 0.5);
  EXPECT_DOUBLE_EQ(s.mismatch, 0.3);
  EXPECT_EQ(s.probe_gflops, 42.0);
  EXPECT_DOUBLE_EQ(quick_probe_gflops(s), 42.0);
  setenv("TESSEL_CONTENTION", "spread=lots", 1);
  EXPECT_NE(error_of([] { contention_settings(); }).find("TESSEL_CONTENTION"), std::string::npos);
  unsetenv("TESSEL_CONTENTION");
  EXPECT_EQ(contention_settings().loadavg, "/proc/loadavg");
}

}  // namespace
}  // namespace tessel::plan
