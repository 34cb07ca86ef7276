// The machine profile: JSON round trip, strict validation (errors name the
// file and the key), GEMM interpolation (exact at grid points, monotone
// between), thread and rank-count scaling, the alpha-beta fit, the cache.
#include "tessel/plan/profile/machine_profile.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "plan/synthetic_profile.h"
#include "tessel/ir/op_table.h"
#include "tessel/plan/calibrate/calibrate.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

MachineProfile synthetic() { return MachineProfile(synthetic_profile_data(), "test.json"); }

double gflops_of(const MachineProfile& p, int64_t b, int64_t m, int64_t n, int64_t k, int t) {
  return 2.0 * b * m * n * k / p.gemm_seconds(b, m, n, k, Precision::kF32, t) / 1e9;
}

TEST(MachineProfile, JsonRoundTripIsExact) {
  const MachineProfile a = synthetic();
  const json j = a.to_json();
  EXPECT_EQ(j["version"], kProfileVersion);
  const MachineProfile b = MachineProfile::from_json(j, "again.json");
  EXPECT_EQ(b.to_json(), j);
  const fs::path file = fs::temp_directory_path() / ("tessel_profile_" + std::to_string(getpid()));
  a.save(file.string());
  EXPECT_EQ(MachineProfile::load(file.string()).to_json(), j);
  fs::remove(file);
}

TEST(MachineProfile, ValidationNamesFileAndKey) {
  const json good = synthetic().to_json();
  auto error = [](const json& j) {
    return error_of([&] { MachineProfile::from_json(j, "p.json"); });
  };

  json j = good;
  j["colour"] = 1;
  EXPECT_NE(error(j).find("p.json"), std::string::npos) << error(j);
  EXPECT_NE(error(j).find("unknown key 'colour'"), std::string::npos) << error(j);
  j = good;
  j.erase("memory");
  EXPECT_NE(error(j).find("key 'memory' is missing"), std::string::npos) << error(j);
  j = good;
  j["memory"][1]["row_gbs"] = -3;
  EXPECT_NE(error(j).find("key 'memory[1].row_gbs' must be a positive number"), std::string::npos)
      << error(j);
  j = good;
  j["gemm"]["f32"][4]["flops"] = 1;
  EXPECT_NE(error(j).find("unknown key 'gemm.f32[4].flops'"), std::string::npos) << error(j);
  j = good;
  j["links"][0]["alpha_s"] = -1e-6;
  EXPECT_NE(error(j).find("key 'links[0].alpha_s' must be a non-negative number"),
            std::string::npos)
      << error(j);
  j = good;
  j["version"] = kProfileVersion + 1;
  EXPECT_NE(error(j).find("key 'version' is"), std::string::npos) << error(j);
  j = good;
  j["gemm"]["f32"].erase(3);  // a hole in the grid
  EXPECT_NE(error(j).find("not a full grid"), std::string::npos) << error(j);
  EXPECT_NE(error_of([] {
              MachineProfile::load("/nonexistent/profile.json");
            }).find("/nonexistent/profile.json"),
            std::string::npos);
}

// Files on disk as a killed writer or a damaged disk leaves them: a
// truncated profile and one with a corrupted value fail naming the file; a
// save that cannot write its temporary file leaves the previous profile as
// it was.
TEST(MachineProfile, TruncatedOrCorruptedFilesFailAndAFailedSaveKeepsTheOldOne) {
  const fs::path dir = fs::temp_directory_path() / ("tessel_profile_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string text = synthetic().to_json().dump(2);
  const fs::path truncated = dir / "truncated.json", corrupted = dir / "corrupted.json";
  std::ofstream(truncated) << text.substr(0, text.size() / 2);
  std::string bad = text;
  bad.replace(bad.find("\"nproc\": 2"), std::string("\"nproc\": 2").size(), "\"nproc\": \"two\"");
  std::ofstream(corrupted) << bad;
  const std::string e1 = error_of([&] { MachineProfile::load(truncated.string()); });
  EXPECT_NE(e1.find(truncated.string() + ": not valid JSON"), std::string::npos) << e1;
  const std::string e2 = error_of([&] { MachineProfile::load(corrupted.string()); });
  EXPECT_NE(e2.find(corrupted.string()), std::string::npos) << e2;
  EXPECT_NE(e2.find("nproc"), std::string::npos) << e2;

  const fs::path kept = dir / "kept.json";
  synthetic().save(kept.string());
  fs::create_directories(kept.string() + ".tmp");  // the temporary file cannot be written
  MachineProfileData other = synthetic_profile_data();
  other.cpu_model = "another CPU";
  EXPECT_FALSE(error_of([&] { MachineProfile(other, "x").save(kept.string()); }).empty());
  EXPECT_EQ(MachineProfile::load(kept.string()).data().cpu_model, synthetic().data().cpu_model);
  fs::remove_all(dir);
}

// Measured kernel rates are charged per op kind (interpolated over
// threads); a kind the profile did not measure takes the roofline; a bad
// entry names its key.
TEST(MachineProfile, KernelRatesChargeTheMeasuredKindsOnly) {
  MachineProfileData d = synthetic_profile_data();
  d.kernels = {{"softmax", 1, 10.0}, {"softmax", 2, 20.0}};
  const MachineProfile p(d, "k.json");
  EXPECT_DOUBLE_EQ(p.kernel_seconds("softmax", 1e9, 0, Precision::kF32, 1), 0.1);
  EXPECT_DOUBLE_EQ(p.kernel_seconds("softmax", 1e9, 0, Precision::kF32, 2), 0.05);
  EXPECT_DOUBLE_EQ(p.kernel_seconds("gelu", 1e9, 0, Precision::kF32, 1), p.memory_seconds(1e9, 1));
  json j = p.to_json();
  EXPECT_EQ(MachineProfile::from_json(j, "k.json").data().kernels.size(), 2u);
  j["kernels"][0]["gbs"] = 0;
  const std::string e = error_of([&] { MachineProfile::from_json(j, "k.json"); });
  EXPECT_NE(e.find("kernels[0].gbs"), std::string::npos) << e;
}

// The fused attention's measured FLOP rate: the longer of the byte rule
// and its FLOPs at the rate (interpolated over threads, per precision);
// doubling the rate halves a compute-bound attention's time; a profile
// without rates (an older one) keeps the byte rule; the rates round-trip and
// a bad entry names its key.
TEST(MachineProfile, AttentionRatesChargeTheAttentionFlops) {
  MachineProfileData d = synthetic_profile_data();
  d.kernels = {{"attention", 1, 10.0}};  // 1e8 bytes: 10 ms
  const MachineProfile old_profile(d, "old.json");
  EXPECT_FALSE(old_profile.has_attention_rates(Precision::kF32));
  EXPECT_DOUBLE_EQ(old_profile.kernel_seconds("attention", 1e8, 1e10, Precision::kF32, 1), 0.01);
  d.attention_rates = {{"attention", Precision::kF32, 1, 20.0},
                       {"attention", Precision::kF32, 2, 40.0},
                       {"attention_grad", Precision::kF32, 1, 10.0}};
  const MachineProfile p(d, "a.json");
  EXPECT_TRUE(p.has_attention_rates(Precision::kF32));
  EXPECT_FALSE(p.has_attention_rates(Precision::kBF16));
  EXPECT_DOUBLE_EQ(p.kernel_seconds("attention", 1e8, 1e10, Precision::kF32, 1), 0.5);
  EXPECT_DOUBLE_EQ(p.kernel_seconds("attention", 1e8, 1e10, Precision::kF32, 2), 0.25);
  EXPECT_DOUBLE_EQ(p.kernel_seconds("attention_grad", 0, 1e10, Precision::kF32, 1), 1.0);
  EXPECT_DOUBLE_EQ(p.kernel_seconds("attention", 1e8, 1e8, Precision::kF32, 1), 0.01);  // bytes
  MachineProfileData doubled = d;
  for (AttentionRate& r : doubled.attention_rates) r.gflops *= 2;
  const MachineProfile q(doubled, "b.json");
  EXPECT_DOUBLE_EQ(q.kernel_seconds("attention", 1e8, 1e10, Precision::kF32, 1),
                   p.kernel_seconds("attention", 1e8, 1e10, Precision::kF32, 1) / 2);
  // Other kinds and the other precision do not read the rates.
  EXPECT_DOUBLE_EQ(p.kernel_seconds("softmax", 1e9, 1e10, Precision::kF32, 1),
                   old_profile.kernel_seconds("softmax", 1e9, 1e10, Precision::kF32, 1));
  json j = p.to_json();
  EXPECT_EQ(MachineProfile::from_json(j, "a.json").to_json(), j);
  EXPECT_EQ(j["attention_rates"][0]["precision"], "f32");
  EXPECT_FALSE(old_profile.to_json().contains("attention_rates"));
  json bad = j;
  bad["attention_rates"][1]["gflops"] = -1;
  std::string e = error_of([&] { MachineProfile::from_json(bad, "a.json"); });
  EXPECT_NE(e.find("attention_rates[1].gflops"), std::string::npos) << e;
  bad = j;
  bad["attention_rates"][0]["op"] = "softmax";
  e = error_of([&] { MachineProfile::from_json(bad, "a.json"); });
  EXPECT_NE(e.find("attention_rates[0].op"), std::string::npos) << e;
  bad = j;
  bad["attention_rates"][0]["precision"] = "f16";
  e = error_of([&] { MachineProfile::from_json(bad, "a.json"); });
  EXPECT_NE(e.find("attention_rates[0].precision"), std::string::npos) << e;
}

// A backward rate states the work count it was divided by; one written
// before the field (the two-pass count, 3.5 forwards) is restated at
// today's count: the same measured time.
TEST(MachineProfile, AttentionGradRatesAreRestatedAtTodaysWorkCount) {
  MachineProfileData d = synthetic_profile_data();
  d.attention_rates = {{"attention_grad", Precision::kF32, 1, 10.0}};
  json j = MachineProfile(d, "a.json").to_json();
  EXPECT_EQ(j["attention_rates"][0]["work_in_forwards"], kAttentionGradForwards);
  const double today = MachineProfile::from_json(j, "a.json")
                           .kernel_seconds("attention_grad", 0, 1e10, Precision::kF32, 1);
  EXPECT_DOUBLE_EQ(today, 1.0);
  j["attention_rates"][0].erase("work_in_forwards");  // a profile from before the field
  EXPECT_DOUBLE_EQ(MachineProfile::from_json(j, "old.json")
                       .kernel_seconds("attention_grad", 0, 1e10, Precision::kF32, 1),
                   today * 3.5 / kAttentionGradForwards);
}

// Philox draws (dropout masks) at the calibrated rate per thread count; a
// profile from before the rate was measured does not price them.
TEST(MachineProfile, DrawsRunAtTheMeasuredPhiloxRate) {
  MachineProfileData d = synthetic_profile_data();
  EXPECT_EQ(MachineProfile(d, "old.json").draw_seconds(1e9, 1), 0);
  d.memory[0].philox_gdraws = 2;  // 1 thread
  d.memory[1].philox_gdraws = 4;  // 2 threads
  const MachineProfile p(d, "p.json");
  EXPECT_DOUBLE_EQ(p.draw_seconds(1e9, 1), 0.5);
  EXPECT_DOUBLE_EQ(p.draw_seconds(1e9, 2), 0.25);
  EXPECT_EQ(MachineProfile::from_json(p.to_json(), "again.json").to_json(), p.to_json());
}

TEST(MachineProfile, GemmIsExactAtGridPoints) {
  const MachineProfile p = synthetic();
  for (const GemmPoint& g : p.data().gemm_f32)
    EXPECT_NEAR(gflops_of(p, g.batch, g.m, g.n, g.k, g.threads), g.gflops, 1e-9 * g.gflops)
        << g.batch << "x" << g.m << "x" << g.n << "x" << g.k << " at " << g.threads;
}

TEST(MachineProfile, GemmIsMonotoneBetweenGridPoints) {
  const MachineProfile p = synthetic();
  // Cubes between the grid's 128 and 256 (aspect 1): rates between the two
  // grid values, never decreasing (the synthetic rate grows with size).
  const double lo = gflops_of(p, 1, 128, 128, 128, 1), hi = gflops_of(p, 1, 256, 256, 256, 1);
  double last = lo;
  for (int64_t c = 129; c < 256; c += 7) {
    const double g = gflops_of(p, 1, c, c, c, 1);
    EXPECT_GE(g, last - 1e-12) << c;
    EXPECT_LE(g, hi + 1e-12) << c;
    last = g;
  }
  // Along the aspect at the volume 256^3: 256 x 512 x 128 (aspect 2) lies
  // halfway between the cube and 512 x 512 x 64 (aspect 4) in log2 aspect,
  // so its log rate is the mean of theirs.
  const double cube = gflops_of(p, 1, 256, 256, 256, 1), thin = gflops_of(p, 1, 512, 512, 64, 1);
  const double mid = gflops_of(p, 1, 256, 512, 128, 1);
  EXPECT_NEAR(mid, std::sqrt(cube * thin), 1e-9 * mid);
  EXPECT_LT(mid, cube);
  EXPECT_GT(mid, thin);
  // Off both grids (400 x 400 x 100): within the four surrounding grid values.
  const double g = gflops_of(p, 1, 400, 400, 100, 1);
  double bound_lo = 1e30, bound_hi = 0;
  for (const GemmPoint& q : p.data().gemm_f32) {
    if (q.threads != 1 || q.batch != 1 || q.m * q.n * q.k < 128 * 128 * 128 ||
        q.m * q.n * q.k > 256 * 256 * 256 || gemm_log_aspect(q.m, q.n, q.k) > 2.5)
      continue;
    bound_lo = std::min(bound_lo, q.gflops);
    bound_hi = std::max(bound_hi, q.gflops);
  }
  EXPECT_GE(g, bound_lo);
  EXPECT_LE(g, bound_hi);
}

TEST(MachineProfile, ThreadsInterpolateAndClamp) {
  const MachineProfile p = synthetic();
  const double one = gflops_of(p, 1, 256, 256, 256, 1), two = gflops_of(p, 1, 256, 256, 256, 2);
  EXPECT_DOUBLE_EQ(gflops_of(p, 1, 256, 256, 256, 8), two);  // beyond the cores: clamped
  // Batched products have their own grid (the synthetic one runs at half rate).
  EXPECT_DOUBLE_EQ(gflops_of(p, 8, 128, 128, 128, 1), 0.5 * gflops_of(p, 1, 128, 128, 128, 1));
  EXPECT_GT(two, one);
  EXPECT_DOUBLE_EQ(p.elementwise_gbs(2), 20);
  EXPECT_DOUBLE_EQ(p.elementwise_gbs(4), 20);
  EXPECT_DOUBLE_EQ(p.memory_seconds(1e9, 1), 0.5 * (1.0 / 10 + 1.0 / 5));
  EXPECT_DOUBLE_EQ(p.peak_flops(Precision::kF32, 2), 200e9);
}

// A profile without bf16 figures (a CPU without native bf16, or an older
// profile) refuses bf16 naming what is missing and the CPU.
TEST(MachineProfile, Bf16WithoutFiguresIsRefusedClearly) {
  const MachineProfile p = synthetic();
  const std::string gemm = error_of([&] { p.gemm_seconds(1, 64, 64, 64, Precision::kBF16, 1); });
  EXPECT_NE(gemm.find("'gemm.bf16' is empty"), std::string::npos) << gemm;
  EXPECT_NE(gemm.find("Test CPU"), std::string::npos) << gemm;
  EXPECT_NE(error_of([&] { p.peak_flops(Precision::kBF16, 1); }).find("no bf16 peak"),
            std::string::npos);
}

// With bf16 figures the profile prices bf16 from them, apart from f32; it
// round-trips them, and refuses a bf16 grid without a bf16 peak (or the
// reverse): calibrate measures the two together.
TEST(MachineProfile, Bf16FiguresPriceBf16AndRoundTrip) {
  MachineProfileData d = synthetic_profile_data();
  for (int threads : {1, 2}) {
    d.bf16_peak_gflops.push_back({threads, 300.0 * threads});
    for (GemmPoint p : calibration_gemm_shapes(/*quick=*/false)) {
      p.threads = threads;
      p.gflops = 3 * synthetic_gflops(p);
      d.gemm_bf16.push_back(p);
    }
  }
  d.einsum_in_situ_bf16 = {{1, 20, 2.0}};
  const MachineProfile p(d, "p.json");
  EXPECT_DOUBLE_EQ(p.peak_flops(Precision::kBF16, 2), 600e9);
  EXPECT_DOUBLE_EQ(p.peak_flops(Precision::kF32, 2), 200e9);
  EXPECT_DOUBLE_EQ(p.gemm_seconds(1, 512, 512, 512, Precision::kF32, 1),
                   3 * p.gemm_seconds(1, 512, 512, 512, Precision::kBF16, 1));
  EXPECT_DOUBLE_EQ(p.einsum_in_situ_factor(std::exp2(20), Precision::kBF16, 1), 2.0);
  EXPECT_DOUBLE_EQ(p.einsum_in_situ_factor(std::exp2(20), Precision::kF32, 1), 1.0);
  const json j = p.to_json();
  EXPECT_EQ(MachineProfile::from_json(j, "p.json").to_json(), j);

  json half = j;
  half.erase("bf16_peak_gflops");
  std::string e = error_of([&] { MachineProfile::from_json(half, "p.json"); });
  EXPECT_NE(e.find("'bf16_peak_gflops' and 'gemm.bf16'"), std::string::npos) << e;
  // Corrupted bf16 entries are refused naming the key, as the f32 ones are.
  json bad = j;
  bad["bf16_peak_gflops"][1]["gflops"] = -5;
  e = error_of([&] { MachineProfile::from_json(bad, "p.json"); });
  EXPECT_NE(e.find("key 'bf16_peak_gflops[1].gflops' must be a positive number"), std::string::npos)
      << e;
  bad = j;
  bad["einsum_in_situ_bf16"][0]["factor"] = "fast";
  e = error_of([&] { MachineProfile::from_json(bad, "p.json"); });
  EXPECT_NE(e.find("einsum_in_situ_bf16[0].factor"), std::string::npos) << e;
}

TEST(MachineProfile, CollectivesScaleByTheRingFromTheMeasuredRankCount) {
  const MachineProfile p = synthetic();
  const double b = 1e6;
  // Measured at 2 ranks: alpha + beta * bytes.
  EXPECT_DOUBLE_EQ(p.collective_seconds(CollectiveKind::kAllReduce, b, 2, Link::kIntraNode),
                   10e-6 + 1e-9 * b);
  // 4 ranks: all-reduce steps 2(p-1) = 6 vs 2, factor 2(p-1)/p = 1.5 vs 1.
  EXPECT_DOUBLE_EQ(p.collective_seconds(CollectiveKind::kAllReduce, b, 4, Link::kIntraNode),
                   3 * 10e-6 + 1.5 * 1e-9 * b);
  // All-gather's payload is one shard: factor p-1 = 3 vs 1.
  EXPECT_DOUBLE_EQ(p.collective_seconds(CollectiveKind::kAllGather, b, 4, Link::kIntraNode),
                   3 * 10e-6 + 3 * 1e-9 * b);
  // One host: inter-node is the intra-node link.
  EXPECT_DOUBLE_EQ(p.collective_seconds(CollectiveKind::kAllToAll, b, 2, Link::kInterNode),
                   p.collective_seconds(CollectiveKind::kAllToAll, b, 2, Link::kIntraNode));
  EXPECT_DOUBLE_EQ(p.p2p_seconds(b, Link::kIntraNode), 10e-6 + 1e-9 * b);
  EXPECT_EQ(p.devices_per_node(), 2);
  EXPECT_EQ(p.device_memory_bytes(), 0);
}

TEST(MachineProfile, MeasuredRankCountsReadTheSamples) {
  // A cliff: fast up to 256 KiB, then slow (shared memory on a busy VM).
  MachineProfileData d = synthetic_profile_data();
  const std::vector<std::pair<double, double>> samples = {
      {4096, 4e-6}, {262144, 44e-6}, {4194304, 16e-3}};
  d.links[0].samples = samples;  // all_reduce at 2 ranks
  d.links[0].fit = fit_alpha_beta(samples);
  const MachineProfile p(d, "cliff.json");
  auto t = [&](double bytes) {
    return p.collective_seconds(CollectiveKind::kAllReduce, bytes, 2, Link::kIntraNode);
  };
  for (const auto& [bytes, seconds] : samples) EXPECT_NEAR(t(bytes), seconds, 1e-15) << bytes;
  double last = t(4096);
  for (double bytes = 8192; bytes < 8e6; bytes *= 1.5) {
    EXPECT_GE(t(bytes), last) << bytes;
    last = t(bytes);
  }
  // Beyond the largest sample: the last segment's slope.
  const double slope = (16e-3 - 44e-6) / (4194304 - 262144);
  EXPECT_NEAR(t(8388608), 16e-3 + slope * 4194304, 1e-12);
  // Below the smallest: never under the fitted latency.
  EXPECT_GE(t(0), d.links[0].fit.alpha_s);
  // Samples out of order are a validation error naming the key.
  nlohmann::json j = p.to_json();
  j["links"][0]["samples"] = {{4096, 1e-6}, {1024, 1e-6}};
  EXPECT_NE(error_of([&] {
              MachineProfile::from_json(j, "p.json");
            }).find("key 'links[0].samples[1]' must have more bytes"),
            std::string::npos);
}

TEST(AlphaBeta, AnOutlierCostsTheSameFactorEitherWay) {
  // Three samples on a line and a fourth 4x slower: the log-ratio fit spreads
  // the error rather than matching three and missing the fourth by 4x.
  std::vector<std::pair<double, double>> samples;
  for (double b : {4096.0, 65536.0, 1048576.0}) samples.emplace_back(b, 5e-6 + 2e-10 * b);
  samples.emplace_back(8388608.0, 4 * (5e-6 + 2e-10 * 8388608.0));
  const AlphaBeta fit = fit_alpha_beta(samples);
  double worst = 0;
  for (const auto& [b, t] : samples)
    worst = std::max(worst, std::abs(std::log(fit.seconds(b) / t)));
  EXPECT_LT(worst, 0.8 * std::log(4.0));
}

TEST(AlphaBeta, FitRecoversALineAndClampsNegatives) {
  std::vector<std::pair<double, double>> samples;
  for (double b : {4096.0, 65536.0, 1048576.0, 8388608.0})
    samples.emplace_back(b, 5e-6 + 2e-10 * b);
  const AlphaBeta fit = fit_alpha_beta(samples);
  EXPECT_NEAR(fit.alpha_s, 5e-6, 1e-12);
  EXPECT_NEAR(fit.beta_s_per_byte, 2e-10, 1e-16);
  // Time falling with size would need a negative beta: all latency instead.
  const AlphaBeta flat = fit_alpha_beta({{1000, 2e-6}, {2000, 1e-6}});
  EXPECT_GE(flat.alpha_s, 0);
  EXPECT_EQ(flat.beta_s_per_byte, 0);
}

TEST(MachineProfile, LoadOrCalibrateReadsTheCache) {
  const fs::path dir = fs::temp_directory_path() / ("tessel_cache_" + std::to_string(getpid()));
  const char* old = std::getenv("XDG_CACHE_HOME");
  const std::string saved = old ? old : "";
  setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  const std::string path = default_profile_path();
  EXPECT_EQ(path.rfind((dir / "tessel" / "profile-").string(), 0), 0u) << path;
  synthetic().save(path);
  bool calibrated = true;
  auto model = load_or_calibrate("", &calibrated);
  EXPECT_FALSE(calibrated);
  EXPECT_NE(model->name().find("Test CPU"), std::string::npos);
  model = load_or_calibrate(path, &calibrated);
  EXPECT_FALSE(calibrated);
  EXPECT_NE(
      error_of([] { load_or_calibrate("/nonexistent.json", nullptr); }).find("/nonexistent.json"),
      std::string::npos);
  if (old)
    setenv("XDG_CACHE_HOME", saved.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessel::plan
