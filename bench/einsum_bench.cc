// Einsum micro-benchmarks (part of tessel_kernel_bench): why the f32 einsum
// copies some operands before the GEMM (kernels/einsum.h). The weight
// gradients of examples/gpt-pipeline.json (4096 tokens, d_model 256, MLP
// 1024) read an operand stored as k lines 1024 floats (4 KiB) apart:
//   BM_SgemmKLines/role/pad: oneDNN's sgemm alone on that operand, read in
//     place (pad 0) or with its leading dimension padded by 16 floats;
//     role 0: it is sgemm's A, read transposed (dW2: 1024 x 256 x 4096);
//     role 1: it is sgemm's B beside 256 rows (dW1: 256 x 1024 x 4096);
//   BM_EinsumWeightGradient/which: the einsum as the runtime runs it (plan,
//     copy, GEMM): 0 dW1, 1 dW2.
// GFLOP/s in the "GFLOPS" counter.
#include <benchmark/benchmark.h>
#include <dnnl.h>

#include <cstdint>
#include <vector>

#include "tessel/kernels/einsum.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kTokens = 4096, kNarrow = 256, kWide = 1024;

void set_gflops(benchmark::State& state, int64_t m, int64_t n, int64_t k) {
  state.counters["GFLOPS"] = benchmark::Counter(2e-9 * double(m) * double(n) * double(k),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SgemmKLines(benchmark::State& state) {
  const bool as_b = state.range(0) == 1;
  const int64_t pad = state.range(1), k = kTokens;
  const int64_t m = as_b ? kNarrow : kWide, n = as_b ? kWide : kNarrow;
  // The k-lines operand: k lines of kWide floats, ld = kWide + pad.
  const int64_t ld = kWide + pad;
  std::vector<float> lines(k * ld, 0.5f), other(k * kNarrow, 0.25f), c(m * n);
  for (auto _ : state) {
    if (as_b)
      dnnl_sgemm('T', 'N', m, n, k, 1.0f, other.data(), kNarrow, lines.data(), ld, 0.0f, c.data(),
                 n);
    else
      dnnl_sgemm('T', 'N', m, n, k, 1.0f, lines.data(), ld, other.data(), kNarrow, 0.0f, c.data(),
                 n);
    benchmark::DoNotOptimize(c.data());
  }
  set_gflops(state, m, n, k);
}
BENCHMARK(BM_SgemmKLines)->ArgsProduct({{0, 1}, {0, 16}})->Unit(benchmark::kMillisecond);

void BM_EinsumWeightGradient(benchmark::State& state) {
  const Dim tokens{"tokens", kTokens}, embed{"embed", kNarrow}, hidden{"hidden", kWide};
  // dW1[embed, hidden] = x^T dh; dW2[hidden, embed] = h^T dy.
  const bool dw2 = state.range(0) == 1;
  const Shape a = dw2 ? Shape{tokens, hidden} : Shape{tokens, embed};
  const Shape b = dw2 ? Shape{tokens, embed} : Shape{tokens, hidden};
  const Shape out = dw2 ? Shape{hidden, embed} : Shape{embed, hidden};
  const EinsumPlan plan = plan_einsum(a, b, out);
  std::vector<float> da(a.numel(), 0.5f), db(b.numel(), 0.25f), dc(out.numel()),
      scratch(plan.scratch_elements() + 1);
  for (auto _ : state) {
    einsum(plan, da.data(), db.data(), dc.data(), scratch.data());
    benchmark::DoNotOptimize(dc.data());
  }
  set_gflops(state, plan.m, plan.n, plan.k);
}
BENCHMARK(BM_EinsumWeightGradient)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessel::kernels
