// `tessel bench step` under real mpirun: the JSON line it prints measures the
// job's work against the job's peak (every rank's threads), so on 2 ranks
// the peak is twice one rank's and the fraction of peak is work over that;
// it once divided the whole job's GFLOP/s by one rank's peak, and printed
// 1.5 of peak for data parallelism on 2 ranks.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

TEST(BenchStep, TwoRanksAreMeasuredAgainstBothRanksPeak) {
  const fs::path dir = fs::temp_directory_path() / "tessel_bench_step_test";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << gpt_config().dump();
  int status = 0;
  const std::string cmd = mpirun(2) + TESSEL_CLI_PATH + " bench step --config " +
                          (dir / "config.json").string() +
                          " --mesh data=2 --threads 1 --steps 2 --warmup 1";
  const std::string out = run(cmd, &status);
  fs::remove_all(dir);
  ASSERT_EQ(status, 0) << cmd << "\n" << out;
  const size_t line = out.rfind("{\"");
  ASSERT_NE(line, std::string::npos) << out;
  const nlohmann::json r = nlohmann::json::parse(out.substr(line, out.find('\n', line) - line));
  EXPECT_EQ(r["ranks"], 2);
  EXPECT_GT(r["peak_gflops_per_rank"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(r["peak_gflops"].get<double>(), 2 * r["peak_gflops_per_rank"].get<double>());
  EXPECT_DOUBLE_EQ(r["fraction_of_peak"].get<double>(),
                   r["gflops"].get<double>() / r["peak_gflops"].get<double>());
  EXPECT_GT(r["fraction_of_peak"].get<double>(), 0);
  EXPECT_LT(r["fraction_of_peak"].get<double>(), 1);
}

}  // namespace
}  // namespace tessel
