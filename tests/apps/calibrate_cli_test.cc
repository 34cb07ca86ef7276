// `tessel calibrate --quick` end to end (a few seconds): it launches mpirun
// for the collectives and writes a profile that loads, validates and answers
// every HardwareModel query; under mpirun it refuses with a clear error.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/run_cli.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/plan/profile/machine_profile.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;

TEST(CalibrateCli, QuickWritesAValidProfile) {
  const fs::path file =
      fs::temp_directory_path() / ("tessel_calibrate_" + std::to_string(getpid()) + ".json");
  // A quiet load and no spread limit (TESSEL_CONTENTION, plan/calibrate/contention.h):
  // this test checks the profile, not whether the shared machine is busy.
  const fs::path quiet = file.string() + ".loadavg";
  std::ofstream(quiet) << "0.00 0.00 0.00 1/100 1\n";
  const auto [code, out] = run_cli("calibrate --quick --threads 2 --out " + file.string(),
                                   "TESSEL_CONTENTION=loadavg=" + quiet.string() + ",spread=1000");
  fs::remove(quiet);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("all_reduce     2 ranks"), std::string::npos) << out;
  const MachineProfile p = MachineProfile::load(file.string());
  EXPECT_EQ(p.data().fma_peak_gflops.size(), 2u);  // 1 and 2 threads
  for (int threads : {1, 2}) {
    EXPECT_GT(p.gemm_seconds(1, 1024, 1536, 384, Precision::kF32, threads), 0);
    EXPECT_GT(p.memory_seconds(1e6, threads), 0);
  }
  EXPECT_GT(p.collective_seconds(CollectiveKind::kAllReduce, 1e6, 2, Link::kIntraNode), 0);
  EXPECT_GT(p.p2p_seconds(1e6, Link::kIntraNode), 0);
  // How non-blocking communication progressed under polling (2-rank launch).
  ASSERT_TRUE(p.data().has_progress);
  const CommProgress& progress = p.data().progress;
  EXPECT_EQ(progress.mode, CommProgress::Mode::kPolled);
  for (double f : {progress.all_reduce_overlap, progress.send_overlap}) {
    EXPECT_GE(f, 0);
    EXPECT_LE(f, 1);
  }
  EXPECT_GT(progress.all_reduce_poll_bytes, 0);
  EXPECT_GT(progress.send_poll_bytes, 0);
  EXPECT_GT(progress.nonblocking_factor, 0);
  // The in-situ factors of the reference program's einsums, at both thread counts.
  for (int threads : {1, 2}) {
    int points = 0;
    for (const InSituPoint& q : p.data().einsum_in_situ) points += q.threads == threads;
    EXPECT_GT(points, 0) << "threads " << threads;
  }
  // The fused attention's FLOP rates: both kinds at both thread counts, in
  // f32 and, exactly where the grid has bf16, in bf16.
  const bool bf16 = !p.data().gemm_bf16.empty();
  for (Precision precision : {Precision::kF32, Precision::kBF16}) {
    EXPECT_EQ(p.has_attention_rates(precision), precision == Precision::kF32 || bf16);
    for (const char* op : {"attention", "attention_grad"})
      for (int threads : {1, 2}) {
        int found = 0;
        for (const AttentionRate& r : p.data().attention_rates)
          found += r.op == op && r.precision == precision && r.threads == threads && r.gflops > 0;
        EXPECT_EQ(found, precision == Precision::kF32 || bf16 ? 1 : 0)
            << op << " " << precision_name(precision) << " threads " << threads;
      }
  }
  EXPECT_NE(out.find("fused attention at context 512"), std::string::npos) << out;
  // bf16 figures exactly where the CPU multiplies bf16 natively: the peak,
  // the grid and the in-situ points, at both thread counts, and the summary
  // prints the bf16 rows.
  if (kernels::cpu_has_native_bf16()) {
    EXPECT_EQ(p.data().bf16_peak_gflops.size(), 2u);
    EXPECT_EQ(p.data().gemm_bf16.size(), p.data().gemm_f32.size());
    EXPECT_NE(out.find("GEMM 1024x1536x384 bf16"), std::string::npos) << out;
    for (int threads : {1, 2}) {
      EXPECT_GT(p.gemm_seconds(1, 1024, 1536, 384, Precision::kBF16, threads), 0);
      EXPECT_GT(p.peak_flops(Precision::kBF16, threads), 0);
      int points = 0;
      for (const InSituPoint& q : p.data().einsum_in_situ_bf16) points += q.threads == threads;
      EXPECT_GT(points, 0) << "bf16, threads " << threads;
    }
  } else {
    EXPECT_TRUE(p.data().bf16_peak_gflops.empty());
    EXPECT_TRUE(p.data().gemm_bf16.empty());
    EXPECT_TRUE(p.data().einsum_in_situ_bf16.empty());
  }
  fs::remove(file);
}

TEST(CalibrateCli, RefusesToRunUnderAnMpiLauncher) {
  // What mpirun sets: calibrate launches mpirun itself, so it must not be
  // launched under one (it fails before measuring anything).
  const auto [code, out] =
      run_cli("calibrate --quick --out /nonexistent/p.json", "OMPI_COMM_WORLD_SIZE=2");
  ASSERT_EQ(code, 1) << out;
  EXPECT_NE(out.find("without mpirun"), std::string::npos) << out;
}

TEST(CalibrateCli, BusyMachineKeepsThePreviousProfile) {
  // A simulated load of 9.5 on this machine's cores (TESSEL_CONTENTION): no
  // profile is measured or cached, the previous one is untouched, and the
  // error names the load and --force. (timeout: the unfixed command
  // calibrated for a minute and overwrote it.)
  const fs::path dir =
      fs::temp_directory_path() / ("tessel_calibrate_busy_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "profile.json", load = dir / "loadavg";
  std::ofstream(file) << "{\"previous\": true}\n";
  std::ofstream(load) << "9.50 8.00 7.00 12/300 4242\n";
  const auto [code, out] = run_cli("calibrate --quick --out " + file.string(),
                                   "TESSEL_CONTENTION=loadavg=" + load.string() + " timeout 30");
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("busy"), std::string::npos) << out;
  EXPECT_NE(out.find("load 9.50"), std::string::npos) << out;
  EXPECT_NE(out.find("--force"), std::string::npos) << out;
  std::stringstream kept;
  kept << std::ifstream(file).rdbuf();
  EXPECT_EQ(kept.str(), "{\"previous\": true}\n");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessel::plan
