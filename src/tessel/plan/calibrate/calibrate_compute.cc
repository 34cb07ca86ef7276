#include "tessel/plan/calibrate/calibrate_compute.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/base/steady_clock.h"
#include "tessel/kernels/einsum.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/kernels/elementwise.h"
#include "tessel/kernels/layernorm.h"
#include "tessel/runtime/machine_peak.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::plan {
namespace {

// The memory-bound kernels run on the GPT benchmark's MLP activation size
// (1024 tokens x 1536), 6 MB an array.
constexpr int64_t kRows = 1024, kCols = 1536;

// Median seconds of `fn` over at least `min_runs` runs and `min_seconds`.
double time_median(double min_seconds, int min_runs, const std::function<void()>& fn) {
  fn();  // warm-up
  std::vector<double> runs;
  double total = 0;
  while (static_cast<int>(runs.size()) < min_runs || total < min_seconds) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    runs.push_back(seconds_since(start));
    total += runs.back();
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

AlignedBuffer filled(int64_t floats) {
  AlignedBuffer buf(static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float));
  float* p = buf.as<float>();
  for (int64_t i = 0; i < floats; ++i) p[i] = 0.001f * static_cast<float>(i % 997);
  return buf;
}

// GFLOP/s of one shape as the runtime multiplies it: f32 through plan_einsum
// + einsum; bf16 through EinsumBf16 with both operands in bf16 (read in
// place) and an f32 result.
double shape_gflops(const GemmPoint& s, Precision precision, double min_seconds) {
  std::vector<Dim> a{{"m", s.m}, {"k", s.k}}, b{{"k", s.k}, {"n", s.n}}, c{{"m", s.m}, {"n", s.n}};
  if (s.batch > 1)
    for (auto* dims : {&a, &b, &c}) dims->insert(dims->begin(), Dim{"g", s.batch});
  const Shape sa(a), sb(b), sc(c);
  AlignedBuffer da = filled(sa.numel()), db = filled(sb.numel()), dc = filled(sc.numel());
  std::function<void()> run;
  kernels::EinsumPlan plan;
  std::optional<kernels::EinsumBf16> bf16;
  AlignedBuffer scratch, a16, b16;
  if (precision == Precision::kF32) {
    plan = kernels::plan_einsum(sa, sb, sc);
    scratch = filled(plan.scratch_elements());
    run = [&] {
      kernels::einsum(plan, da.as<float>(), db.as<float>(), dc.as<float>(), scratch.as<float>());
    };
  } else {
    a16 = AlignedBuffer(static_cast<size_t>(sa.numel()) * 2);
    b16 = AlignedBuffer(static_cast<size_t>(sb.numel()) * 2);
    round_to_bf16(da.as<float>(), a16.as<uint16_t>(), sa.numel());
    round_to_bf16(db.as<float>(), b16.as<uint16_t>(), sb.numel());
    bf16.emplace(sa, sb, sc, true, kernels::Bf16Operands{true, true, false});
    scratch = AlignedBuffer(std::max<size_t>(bf16->scratch_bytes(), 64));
    run = [&] { bf16->run(a16.data(), b16.data(), dc.data(), scratch.data()); };
  }
  const double seconds = time_median(min_seconds, 3, run);
  return 2.0 * s.batch * s.m * s.n * s.k / seconds / 1e9;
}

// A grid point's rate: the median over the point and its variants
// (calibration_gemm_variants), the mean of the middle two of the four.
double gemm_gflops(const GemmPoint& point, Precision precision, double min_seconds) {
  std::vector<double> rates;
  for (const GemmPoint& v : calibration_gemm_variants(point))
    rates.push_back(shape_gflops(v, precision, min_seconds));
  std::sort(rates.begin(), rates.end());
  const size_t n = rates.size();
  return n % 2 ? rates[n / 2] : (rates[n / 2 - 1] + rates[n / 2]) / 2;
}

MemoryRate memory_rates(int threads, double min_seconds) {
  const int64_t n = kRows * kCols;
  AlignedBuffer x = filled(n), y = filled(n), z = filled(n), gamma = filled(kCols),
                beta = filled(kCols);
  const int64_t strides[1] = {1}, sizes[1] = {n};
  const double add = time_median(min_seconds, 5, [&] {
    kernels::binary(kernels::BinaryOp::kAdd, x.as<float>(), strides, y.as<float>(), strides,
                    z.as<float>(), sizes, 1);
  });
  const double norm = time_median(min_seconds, 5, [&] {
    kernels::layernorm_forward(x.as<float>(), gamma.as<float>(), beta.as<float>(), z.as<float>(),
                               kRows, kCols, 1e-5f);
  });
  // Uniforms written to memory, one row of draws per task, as dropout draws them.
  const PhiloxStream stream(1, "calibrate");
  const double draws = time_median(min_seconds, 5, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < kRows; ++row)
      stream.uniforms(row * kCols, 1, kCols, 0, z.as<float>() + row * kCols);
  });
  return {threads, 3.0 * n * sizeof(float) / add / 1e9, 2.0 * n * sizeof(float) / norm / 1e9,
          n / draws / 1e9};
}

}  // namespace

std::vector<GemmPoint> calibration_gemm_shapes(bool quick) {
  std::vector<GemmPoint> shapes;
  auto add = [&](int64_t batch, int64_t c) {
    // Aspect 1, 4, 16: volume c^3 with the thin dim c, c/4, c/16.
    shapes.push_back({1, batch, c, c, c, 0});
    shapes.push_back({1, batch, 2 * c, 2 * c, c / 4, 0});
    shapes.push_back({1, batch, 4 * c, 4 * c, c / 16, 0});
  };
  for (int64_t c = 64; c <= (quick ? 512 : 1024); c *= 2) add(1, c);
  for (int64_t c = 64; c <= (quick ? 128 : 256); c *= 2) add(8, c);
  return shapes;
}

std::vector<GemmPoint> calibration_gemm_variants(const GemmPoint& p) {
  // A dim of at least 32 times f, to a multiple of 8; smaller dims unchanged.
  auto moved = [](int64_t d, double f) {
    if (d < 32) return d;
    return std::max<int64_t>(8, static_cast<int64_t>(std::lround(d * f / 8)) * 8);
  };
  std::vector<GemmPoint> out{p};
  const double up = 1.125, down = 0.875;
  for (int v = 0; v < 3; ++v) {
    GemmPoint q = p;
    q.m = moved(p.m, v == 0 ? up : v == 2 ? down : 1);
    q.n = moved(p.n, v == 1 ? up : v == 0 ? down : 1);
    q.k = moved(p.k, v == 2 ? up : v == 1 ? down : 1);
    out.push_back(q);
  }
  return out;
}

MemoryRate measure_memory_rates(int threads, bool quick) {
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  const MemoryRate rate = memory_rates(threads, quick ? 0.01 : 0.04);
  omp_set_num_threads(saved_threads);
  return rate;
}

void keep_faster(MemoryRate& rate, const MemoryRate& repeat) {
  TS_CHECK(rate.threads == repeat.threads, "keep_faster: ", rate.threads, " threads against ",
           repeat.threads);
  rate.elementwise_gbs = std::max(rate.elementwise_gbs, repeat.elementwise_gbs);
  rate.row_gbs = std::max(rate.row_gbs, repeat.row_gbs);
  rate.philox_gdraws = std::max(rate.philox_gdraws, repeat.philox_gdraws);
}

MachineProfileData measure_compute(const std::vector<int>& thread_counts, bool quick,
                                   bool progress) {
  const double min_seconds = quick ? 0.01 : 0.04;
  const int saved_threads = omp_get_max_threads();
  const bool bf16 = kernels::cpu_has_native_bf16();
  MachineProfileData out;
  for (int threads : thread_counts) {
    TS_CHECK(threads >= 1, "threads ", threads);
    const auto start = std::chrono::steady_clock::now();
    omp_set_num_threads(threads);
    auto grid = [&](Precision precision, std::vector<GemmPoint>& points) {
      for (GemmPoint s : calibration_gemm_shapes(quick)) {
        s.threads = threads;
        s.gflops = gemm_gflops(s, precision, min_seconds);
        points.push_back(s);
      }
    };
    out.fma_peak_gflops.push_back({threads, measure_fma_peak_gflops(threads, quick ? 0.1 : 0.2)});
    grid(Precision::kF32, out.gemm_f32);
    if (bf16) {
      out.bf16_peak_gflops.push_back(
          {threads, measure_bf16_peak_gflops(threads, quick ? 0.1 : 0.2)});
      grid(Precision::kBF16, out.gemm_bf16);
    }
    out.memory.push_back(measure_memory_rates(threads, quick));
    if (progress)
      std::fprintf(stderr,
                   "calibrate: %d thread%s: FMA peak %.1f GFLOP/s, %zu GEMM shapes%s, %.1f s\n",
                   threads, threads == 1 ? "" : "s", out.fma_peak_gflops.back().gflops,
                   calibration_gemm_shapes(quick).size(), bf16 ? " in f32 and bf16" : " (f32)",
                   seconds_since(start));
  }
  omp_set_num_threads(saved_threads);
  return out;
}

}  // namespace tessel::plan
