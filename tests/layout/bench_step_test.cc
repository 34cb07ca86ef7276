// `tessel bench step` under real mpirun: the JSON line it prints measures the
// job's work against the job's peak (every rank's threads), so on 2 ranks
// the peak is twice one rank's and the fraction of peak is work over that;
// it once divided the whole job's GFLOP/s by one rank's peak, and printed
// 1.5 of peak for data parallelism on 2 ranks. Pipelines are timed too.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

// The JSON line `bench step` prints on `ranks` ranks with `args`.
nlohmann::json bench_step(const std::string& name, int ranks, const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / ("tessel_bench_step_test_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << gpt_config().dump();
  int status = 0;
  const std::string cmd = mpirun(ranks) + TESSEL_CLI_PATH + " bench step --config " +
                          (dir / "config.json").string() + " --threads 1 --steps 2 --warmup 1 " +
                          args;
  const std::string out = run(cmd, &status);
  fs::remove_all(dir);
  EXPECT_EQ(status, 0) << cmd << "\n" << out;
  const size_t line = out.rfind("{\"");
  if (status != 0 || line == std::string::npos) {
    ADD_FAILURE() << "no JSON line: " << out;
    return {};
  }
  return nlohmann::json::parse(out.substr(line, out.find('\n', line) - line));
}

TEST(BenchStep, TwoRanksAreMeasuredAgainstBothRanksPeak) {
  const nlohmann::json r = bench_step("data2", 2, "--mesh data=2");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["ranks"], 2);
  EXPECT_GT(r["peak_gflops_per_rank"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(r["peak_gflops"].get<double>(), 2 * r["peak_gflops_per_rank"].get<double>());
  EXPECT_DOUBLE_EQ(r["fraction_of_peak"].get<double>(),
                   r["gflops"].get<double>() / r["peak_gflops"].get<double>());
  EXPECT_GT(r["fraction_of_peak"].get<double>(), 0);
  EXPECT_LT(r["fraction_of_peak"].get<double>(), 1);
  EXPECT_TRUE(r.contains("comm_fraction"));
  // Throughput named by the task's items, in total and per rank.
  EXPECT_DOUBLE_EQ(r["tokens_per_s_per_rank"].get<double>(), r["tokens_per_s"].get<double>() / 2);
}

// A pipeline has one program per stage: it is timed like any run, with no
// comm_fraction (its stages' waits on each other are in no program's count).
TEST(BenchStep, TimesPipelines) {
  const nlohmann::json r = bench_step("pipe2", 2, "--mesh pipe=2 --microbatches 2");
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["mesh"], "pipe=2");
  EXPECT_GT(r["ms_per_step_median"].get<double>(), 0);
  EXPECT_FALSE(r.contains("comm_fraction"));
  // The whole model's parameters, not the root's stage's.
  const nlohmann::json one = bench_step("one_rank", 1, "");
  ASSERT_FALSE(one.is_null());
  EXPECT_EQ(r["parameters"], one["parameters"]);
}

}  // namespace
}  // namespace tessel
