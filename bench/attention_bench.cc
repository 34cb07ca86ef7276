// Google Benchmark timings of the fused attention kernels (kernels/attention.h)
// alone, causal, at the GPT benchmark's attention shapes: 6 heads of 64, batch
// 8 at context 128 (examples/gpt-bench.json) and batch 1 at context 2048; q,
// k, v as the GPT stores them ([batch, seq, heads, head]), f32 or bf16 (a bf16
// program stores q, k, v and dout in bf16). Forward alone, forward then
// backward (what bench/attention_vs_sdpa.sh sets beside PyTorch's
// scaled_dot_product_attention), and the backward alone by attention_backward
// and by ring attention's entry points (delta from the output, then the
// gradients). Threads from OMP_NUM_THREADS. Counters:
// `GFLOPs` counts the causal half of the q.k and p.v products (4 s^2 d / 2
// per row forward, 2.5 times that backward), as FlashAttention's papers do.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/base/philox.h"
#include "tessel/kernels/attention.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kAttnHeads = 6, kAttnHead = 64;

std::vector<float> uniform(int64_t n, uint64_t seed) {
  PhiloxStream stream(seed, "attention_bench");
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = -1.0f + 2.0f * stream.uniform(i);
  return v;
}

// q, k, v, dout of one shape, f32 and their bf16 copies.
struct AttentionCase {
  AttentionLayout layout;
  std::vector<float> q, k, v, dout, out, lse, dq, dk, dv, scratch;
  int threads = omp_get_max_threads();  // the backward's scratch has a block for each
  std::vector<uint16_t> q16, k16, v16, dout16;

  AttentionCase(int64_t batch, int64_t seq, bool bf16) {
    AttentionLayout& a = layout;
    a.sq = a.sk = seq;
    a.d = kAttnHead;
    a.row_rank = 2;
    a.row_size[0] = batch;
    a.row_size[1] = kAttnHeads;
    a.q_row[0] = a.k_row[0] = seq * kAttnHeads * kAttnHead;
    a.q_row[1] = a.k_row[1] = kAttnHead;
    a.lse_row[0] = kAttnHeads * seq;
    a.lse_row[1] = seq;
    a.q_seq = a.k_seq = kAttnHeads * kAttnHead;
    a.q_head = a.k_head = 1;
    a.lse_seq = 1;
    a.causal = true;
    a.scale = 1.0f / std::sqrt(static_cast<float>(kAttnHead));
    a.bf16 = bf16;
    const int64_t n = batch * seq * kAttnHeads * kAttnHead;
    q = uniform(n, 1), k = uniform(n, 2), v = uniform(n, 3), dout = uniform(n, 4);
    out.resize(n), dq.resize(n), dk.resize(n), dv.resize(n);
    lse.resize(batch * kAttnHeads * seq);
    scratch.resize(attention_backward_scratch_floats(a, threads));
    for (auto [from, to] : {std::pair{&q, &q16}, {&k, &k16}, {&v, &v16}, {&dout, &dout16}}) {
      to->resize(n);
      round_to_bf16(from->data(), to->data(), n);
    }
  }
  AttentionInput in(const std::vector<float>& x, const std::vector<uint16_t>& x16) const {
    return layout.bf16 ? AttentionInput{x16.data(), true} : AttentionInput{x.data(), false};
  }
  void forward() {
    attention_forward(layout, in(q, q16), in(k, k16), in(v, v16), out.data(), lse.data());
  }
  void backward() {
    attention_backward(layout, in(q, q16), in(k, k16), in(v, v16), lse.data(), in(dout, dout16),
                       dq.data(), dk.data(), dv.data(), scratch.data(), threads);
  }
  void backward_ring() {  // the ring's entry points: deltas, then gradients
    attention_output_delta(layout, in(dout, dout16), out.data(), scratch.data());
    attention_backward_grads(layout, in(q, q16), in(k, k16), in(v, v16), lse.data(),
                             in(dout, dout16), scratch.data(), dq.data(), dk.data(), dv.data());
  }
  double causal_flops() const {  // the forward's two products over the causal half
    return 4.0 * layout.rows() * layout.sq * layout.sk * layout.d / 2;
  }
};

// Args: batch, context, bf16 (0/1).
// (batch, context, bf16): gpt-bench's shape and context 2048, f32 and bf16.
void gpt_bench_and_long_context(benchmark::internal::Benchmark* b) {
  b->ArgsProduct({{8}, {128}, {0, 1}})
      ->ArgsProduct({{1}, {2048}, {0, 1}})
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

void BM_AttentionForward(benchmark::State& state) {
  AttentionCase c(state.range(0), state.range(1), state.range(2) != 0);
  for (auto _ : state) {
    c.forward();
    benchmark::DoNotOptimize(c.out.data());
  }
  state.counters["GFLOPs"] =
      benchmark::Counter(c.causal_flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionForward)->Apply(gpt_bench_and_long_context);

void BM_AttentionForwardBackward(benchmark::State& state) {
  AttentionCase c(state.range(0), state.range(1), state.range(2) != 0);
  for (auto _ : state) {
    c.forward();
    c.backward();
    benchmark::DoNotOptimize(c.dq.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(c.causal_flops() * 3.5 * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionForwardBackward)->Apply(gpt_bench_and_long_context);

// The backward alone: attention_backward's one pass, and the same gradients
// by ring attention's entry points (five block products per pair each; the
// ring's p and dp are recomputed per key chunk, its keys gathered per call).
void BM_AttentionBackward(benchmark::State& state) {
  AttentionCase c(state.range(0), state.range(1), state.range(2) != 0);
  c.forward();
  const bool ring = state.range(3) != 0;
  for (auto _ : state) {
    if (ring)
      c.backward_ring();
    else
      c.backward();
    benchmark::DoNotOptimize(c.dq.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(c.causal_flops() * 2.5 * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionBackward)
    ->ArgNames({"batch", "context", "bf16", "ring"})
    ->ArgsProduct({{8}, {128}, {0, 1}, {0, 1}})
    ->ArgsProduct({{1}, {2048}, {0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tessel::kernels
