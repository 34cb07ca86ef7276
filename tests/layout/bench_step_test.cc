// `tessel bench step` under real mpirun: the JSON line it prints measures the
// job's work against the job's peak (every rank's threads), so on 2 ranks
// the peak is twice one rank's and the fraction of peak is work over that
// (never the job's GFLOP/s over one rank's peak). Pipelines are timed too.
// --breakdown's parts add up to the steps it timed.
#include <cstdio>

#include "layout/layout_harness.h"

namespace tessel {
namespace {

// What `bench step` prints (stdout and stderr) on `ranks` ranks with
// `args`, and its exit status.
std::string bench_step_output(const std::string& name, int ranks, const std::string& args,
                              int* status, int threads = 1) {
  const fs::path dir = fs::temp_directory_path() / ("tessel_bench_step_test_" + name);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << gpt_config().dump();
  const std::string cmd = mpirun(ranks) + TESSEL_CLI_PATH + " bench step --config " +
                          (dir / "config.json").string() + " --threads " + std::to_string(threads) +
                          " --steps 2 --warmup 1 " + args;
  const std::string out = run(cmd, status);
  fs::remove_all(dir);
  return cmd + "\n" + out;
}

// The JSON line `bench step` prints on `ranks` ranks with `args`.
nlohmann::json bench_step(const std::string& name, int ranks, const std::string& args,
                          int threads = 1) {
  int status = 0;
  const std::string out = bench_step_output(name, ranks, args, &status, threads);
  EXPECT_EQ(status, 0) << out;
  const size_t line = out.rfind("\n{\"");  // a line of its own (objects nest in it)
  if (status != 0 || line == std::string::npos) {
    ADD_FAILURE() << "no JSON line: " << out;
    return {};
  }
  return nlohmann::json::parse(out.substr(line + 1, out.find('\n', line + 1) - line - 1));
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

// A rank's peak is at least its threads at the single-core rate: the
// threads' probe alone can read low on a shared host (one vCPU lost for its
// 0.2 s), and printed a fraction of peak above 1.
TEST(BenchStep, ARanksPeakIsAtLeastItsThreadsAtOneCoresRate) {
  const nlohmann::json r = bench_step("two_threads", 1, "", 2);
  ASSERT_FALSE(r.is_null());
  EXPECT_EQ(r["threads"], 2);
  EXPECT_GE(r["peak_gflops_per_rank"].get<double>(), 2 * r["peak_gflops_1core"].get<double>());
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

// On 2 data-parallel ranks (gradient buckets, an optimizer step after the
// program): every instruction kind, plus the time before and after the
// program, adds up to the mean step that bench step itself timed.
TEST(BenchStep, BreakdownAddsUpToTheTimedSteps) {
  const nlohmann::json r = bench_step("breakdown", 2, "--mesh data=2 --breakdown");
  ASSERT_FALSE(r.is_null());
  ASSERT_TRUE(r.contains("breakdown"));
  const nlohmann::json& b = r["breakdown"];
  EXPECT_EQ(b["steps"], 2);
  EXPECT_EQ(b["program_runs"], 2);
  double sum = b["before_ms"].get<double>() + b["after_ms"].get<double>();
  EXPECT_GT(b["before_ms"].get<double>(), 0);
  EXPECT_GT(b["after_ms"].get<double>(), 0);  // the optimizer update at least
  int einsums = 0;
  double previous = 1e300;
  for (const nlohmann::json& k : b["kinds"]) {
    const double ms = k["ms"].get<double>();
    EXPECT_GE(ms, 0) << k;
    EXPECT_LE(ms, previous) << "largest first: " << k;
    EXPECT_GE(k["count"].get<int>(), 1) << k;
    previous = ms;
    sum += ms;
    const bool einsum = k["kind"].get<std::string>().rfind("einsum ", 0) == 0;
    if (einsum) einsums += k["count"].get<int>();
    // An einsum's GEMM rate is its flops (2 b m n k per call, from the kind's
    // "einsum BxMxNxK" name) over its time. Both the rate and the peak probe
    // are measured, so on a shared host a small GEMM can read above the
    // probe: the peak bounds it only against unit errors (a factor of 4).
    EXPECT_EQ(k.contains("gflops"), einsum && ms > 0) << k;
    if (k.contains("gflops")) {
      long long b = 0, m = 0, n = 0, kk = 0;
      ASSERT_EQ(std::sscanf(k["kind"].get<std::string>().c_str(), "einsum %lldx%lldx%lldx%lld", &b,
                            &m, &n, &kk),
                4)
          << k;
      const double flops = 2.0 * b * m * n * kk * k["count"].get<int>();
      EXPECT_NEAR(k["gflops"].get<double>(), flops / (ms * 1e6), 1e-6 * flops / (ms * 1e6)) << k;
      EXPECT_LT(k["gflops"].get<double>(), 4 * r["peak_gflops_per_rank"].get<double>()) << k;
    }
  }
  EXPECT_GT(einsums, 0);
  const double step = b["step_ms_mean"].get<double>();
  EXPECT_NEAR(sum, step, 1e-9 * step);
  // Two timed steps: their median is their mean; the breakdown's window
  // only adds a clock read at each end.
  EXPECT_NEAR(step, r["ms_per_step_median"].get<double>(),
              0.02 * r["ms_per_step_median"].get<double>() + 0.1);
}

// A pipeline runs a program per stage and micro-batch: refused, naming why.
TEST(BenchStep, BreakdownRefusesPipelines) {
  int status = 0;
  const std::string out =
      bench_step_output("breakdown_pipe", 2, "--mesh pipe=2 --microbatches 2 --breakdown", &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("--breakdown times one training program"), std::string::npos) << out;
  EXPECT_NE(out.find("pipe=2"), std::string::npos) << out;
  EXPECT_EQ(out.find("ms_per_step"), std::string::npos) << "refused before timing: " << out;
}

}  // namespace
}  // namespace tessel
