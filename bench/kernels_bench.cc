// Google Benchmark timings of the CPU kernels at the GPT benchmark sizes:
// 1024 tokens (batch 8 x seq 128), embed 384, MLP 1536, vocab 256, 6 heads, and
// an optimizer step over ~10M parameters. Bytes processed counts each array the
// kernel must read or write once (masked attention entries included).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/base/philox.h"
#include "tessel/kernels/cross_entropy.h"
#include "tessel/kernels/dropout.h"
#include "tessel/kernels/elementwise.h"
#include "tessel/kernels/embedding.h"
#include "tessel/kernels/layernorm.h"
#include "tessel/kernels/optimizer.h"
#include "tessel/kernels/reduce.h"
#include "tessel/kernels/softmax.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kBenchTokens = 8 * 128;
constexpr int64_t kEmbed = 384;
constexpr int64_t kHidden = 1536;
constexpr int64_t kVocab = 256;
constexpr int64_t kHeads = 6;
constexpr int64_t kSeq = 128;
constexpr int64_t kParams = 10 * 1000 * 1000;

std::vector<float> random_vec(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  PhiloxStream stream(seed, "kernels_bench");
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * stream.uniform(i);
  return v;
}

std::vector<int32_t> random_ids(int64_t n, int64_t bound, uint64_t seed) {
  PhiloxStream stream(seed, "kernels_bench_ids");
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(stream.below(bound, i));
  return ids;
}

void set_bytes(benchmark::State& state, int64_t floats) {
  state.SetBytesProcessed(state.iterations() * floats * static_cast<int64_t>(sizeof(float)));
}

// ---- elementwise -------------------------------------------------------------

// Out = float, or uint16_t: the output stored in bf16 (a bf16 program's MLP
// hidden activation).
template <typename Out>
void BM_BiasGelu(benchmark::State& state) {
  const int64_t rows = kBenchTokens, cols = kHidden;
  const auto x = random_vec(rows * cols, 1, -3, 3), bias = random_vec(cols, 2);
  std::vector<Out> y(rows * cols);
  for (auto _ : state) {
    bias_gelu(x.data(), bias.data(), y.data(), rows, cols);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * (rows * cols * (4 + sizeof(Out)) + cols * 4));
}
BENCHMARK(BM_BiasGelu<float>);
BENCHMARK(BM_BiasGelu<uint16_t>);

void BM_BiasGeluBackward(benchmark::State& state) {
  const int64_t rows = kBenchTokens, cols = kHidden;
  const auto x = random_vec(rows * cols, 1, -3, 3), bias = random_vec(cols, 2);
  const auto dy = random_vec(rows * cols, 3);
  std::vector<float> dpre(rows * cols);
  for (auto _ : state) {
    bias_gelu_backward(x.data(), bias.data(), dy.data(), dpre.data(), rows, cols);
    benchmark::DoNotOptimize(dpre.data());
  }
  set_bytes(state, 3 * rows * cols + cols);
}
BENCHMARK(BM_BiasGeluBackward);

void BM_AddBias(benchmark::State& state) {
  const int64_t rows = kBenchTokens, cols = kEmbed;
  const auto a = random_vec(rows * cols, 4), b = random_vec(cols, 5);
  std::vector<float> out(rows * cols);
  const int64_t sizes[] = {8, 128, cols}, a_strides[] = {128 * cols, cols, 1},
                b_strides[] = {0, 0, 1};
  for (auto _ : state) {
    binary(BinaryOp::kAdd, a.data(), a_strides, b.data(), b_strides, out.data(), sizes, 3);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 2 * rows * cols + cols);
}
BENCHMARK(BM_AddBias);

void BM_PermuteHeads(benchmark::State& state) {
  // (batch, seq, heads, head_dim) -> (batch, heads, seq, head_dim)
  const int64_t hd = kEmbed / kHeads, numel = kBenchTokens * kEmbed;
  const auto x = random_vec(numel, 6);
  std::vector<float> out(numel);
  const int64_t sizes[] = {8, kHeads, kSeq, hd};
  const int64_t strides[] = {kSeq * kEmbed, hd, kEmbed, 1};
  for (auto _ : state) {
    expand(x.data(), strides, out.data(), sizes, 4);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 2 * numel);
}
BENCHMARK(BM_PermuteHeads);

void BM_Dropout(benchmark::State& state) {
  const int64_t n = kBenchTokens * kEmbed;
  const auto x = random_vec(n, 7);
  std::vector<float> y(n);
  for (auto _ : state) {
    dropout(x.data(), y.data(), n, 0.1f, 1234, 5678, 0, 0);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2 * n);
}
BENCHMARK(BM_Dropout);

// ---- reductions, softmax, layernorm --------------------------------------------

void BM_ReduceBiasGrad(benchmark::State& state) {
  // (batch, seq, hidden) -> (hidden)
  const auto x = random_vec(kBenchTokens * kHidden, 8);
  std::vector<float> y(kHidden);
  const int64_t sizes[] = {8, 128, kHidden};
  const bool reduced[] = {true, true, false};
  for (auto _ : state) {
    reduce(ReduceOp::kSum, x.data(), sizes, 3, reduced, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, kBenchTokens * kHidden + kHidden);
}
BENCHMARK(BM_ReduceBiasGrad);

void BM_SoftmaxCausal(benchmark::State& state) {
  const int64_t rows = 8 * kHeads * kSeq, n = kSeq;
  const auto x = random_vec(rows * n, 9, -4, 4);
  std::vector<float> y(rows * n);
  const CausalMask mask{kSeq, 1};
  for (auto _ : state) {
    softmax_forward(x.data(), y.data(), rows, n, 1, 0.125f, &mask);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2 * rows * n);
}
BENCHMARK(BM_SoftmaxCausal);

void BM_SoftmaxBackward(benchmark::State& state) {
  const int64_t rows = 8 * kHeads * kSeq, n = kSeq;
  const auto y = random_vec(rows * n, 10, 0, 0.1f), dy = random_vec(rows * n, 11);
  std::vector<float> dx(rows * n);
  for (auto _ : state) {
    softmax_backward(y.data(), dy.data(), dx.data(), rows, n, 1, 0.125f);
    benchmark::DoNotOptimize(dx.data());
  }
  set_bytes(state, 3 * rows * n);
}
BENCHMARK(BM_SoftmaxBackward);

void BM_LayerNormForward(benchmark::State& state) {
  const int64_t rows = kBenchTokens, cols = kEmbed;
  const auto x = random_vec(rows * cols, 12), g = random_vec(cols, 13), b = random_vec(cols, 14);
  std::vector<float> y(rows * cols);
  for (auto _ : state) {
    layernorm_forward(x.data(), g.data(), b.data(), y.data(), rows, cols, 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2 * rows * cols + 2 * cols);
}
BENCHMARK(BM_LayerNormForward);

void BM_LayerNormBackwardInput(benchmark::State& state) {
  const int64_t rows = kBenchTokens, cols = kEmbed;
  const auto x = random_vec(rows * cols, 12), g = random_vec(cols, 13);
  const auto dy = random_vec(rows * cols, 15);
  std::vector<float> dx(rows * cols);
  for (auto _ : state) {
    layernorm_backward_input(x.data(), g.data(), dy.data(), dx.data(), rows, cols, 1e-5f);
    benchmark::DoNotOptimize(dx.data());
  }
  set_bytes(state, 3 * rows * cols + cols);
}
BENCHMARK(BM_LayerNormBackwardInput);

void BM_LayerNormBackwardParams(benchmark::State& state) {
  const int64_t rows = kBenchTokens, cols = kEmbed;
  const auto x = random_vec(rows * cols, 12), dy = random_vec(rows * cols, 15);
  std::vector<float> dg(cols), db(cols);
  for (auto _ : state) {
    layernorm_backward_params(x.data(), dy.data(), dg.data(), db.data(), rows, cols, 1e-5f);
    benchmark::DoNotOptimize(dg.data());
  }
  set_bytes(state, 2 * rows * cols + 2 * cols);
}
BENCHMARK(BM_LayerNormBackwardParams);

// ---- loss, embedding ---------------------------------------------------------

void BM_CrossEntropyForward(benchmark::State& state) {
  const auto logits = random_vec(kBenchTokens * kVocab, 16, -5, 5);
  const auto labels = random_ids(kBenchTokens, kVocab, 17);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        cross_entropy_forward(logits.data(), labels.data(), kBenchTokens, kVocab));
  }
  set_bytes(state, kBenchTokens * kVocab + kBenchTokens);
}
BENCHMARK(BM_CrossEntropyForward);

void BM_CrossEntropyBackward(benchmark::State& state) {
  const auto logits = random_vec(kBenchTokens * kVocab, 16, -5, 5);
  const auto labels = random_ids(kBenchTokens, kVocab, 17);
  std::vector<float> d(kBenchTokens * kVocab);
  for (auto _ : state) {
    cross_entropy_backward(logits.data(), labels.data(), 1.0f, d.data(), kBenchTokens, kVocab);
    benchmark::DoNotOptimize(d.data());
  }
  set_bytes(state, 2 * kBenchTokens * kVocab + kBenchTokens);
}
BENCHMARK(BM_CrossEntropyBackward);

void BM_EmbeddingForward(benchmark::State& state) {
  const auto table = random_vec(kVocab * kEmbed, 18);
  const auto ids = random_ids(kBenchTokens, kVocab, 19);
  std::vector<float> out(kBenchTokens * kEmbed);
  for (auto _ : state) {
    embedding_forward(table.data(), ids.data(), out.data(), kBenchTokens, kVocab, kEmbed);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 2 * kBenchTokens * kEmbed + kBenchTokens);
}
BENCHMARK(BM_EmbeddingForward);

void BM_EmbeddingBackward(benchmark::State& state) {
  const auto dout = random_vec(kBenchTokens * kEmbed, 20);
  const auto ids = random_ids(kBenchTokens, kVocab, 19);
  std::vector<float> dtable(kVocab * kEmbed);
  for (auto _ : state) {
    embedding_backward(ids.data(), dout.data(), dtable.data(), kBenchTokens, kVocab, kEmbed);
    benchmark::DoNotOptimize(dtable.data());
  }
  set_bytes(state, kBenchTokens * kEmbed + kVocab * kEmbed + kBenchTokens);
}
BENCHMARK(BM_EmbeddingBackward);

// ---- optimizer ---------------------------------------------------------------

void BM_AdamW(benchmark::State& state) {
  auto param = random_vec(kParams, 21), m = random_vec(kParams, 22, -0.01f, 0.01f);
  auto v = random_vec(kParams, 23, 0.0f, 0.01f);
  const auto grad = random_vec(kParams, 24);
  int64_t step = 1;
  for (auto _ : state) {
    adamw_update(param.data(), grad.data(), m.data(), v.data(), kParams, 1e-3f, 0.9f, 0.95f, 1e-8f,
                 0.1f, step++, 1.0f);
    benchmark::DoNotOptimize(param.data());
  }
  set_bytes(state, 7 * kParams);  // read param, grad, m, v; write param, m, v
}
BENCHMARK(BM_AdamW)->Unit(benchmark::kMillisecond);

void BM_SumOfSquares(benchmark::State& state) {
  const auto grad = random_vec(kParams, 24);
  for (auto _ : state) benchmark::DoNotOptimize(sum_of_squares(grad.data(), kParams));
  set_bytes(state, kParams);
}
BENCHMARK(BM_SumOfSquares)->Unit(benchmark::kMillisecond);

// ---- bf16 rounding -------------------------------------------------------------

// A bf16 program's f32-to-bf16 copies (a 1024 x 384 activation gradient, a
// 1024 x 1536 one): round_to_bf16 (what the program runs) against the plain
// oneDNN reorder it replaced. Threads from OMP_NUM_THREADS.
void BM_RoundToBf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto x = random_vec(n, 31);
  std::vector<uint16_t> y(n);
  for (auto _ : state) {
    round_to_bf16(x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 6);
}
BENCHMARK(BM_RoundToBf16)->Arg(kBenchTokens* kEmbed)->Arg(kBenchTokens* kHidden);

void BM_OneDnnReorderToBf16(benchmark::State& state) {
  const int64_t n = state.range(0);
  auto x = random_vec(n, 31);
  std::vector<uint16_t> y(n);
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const dnnl::memory::desc from({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  const dnnl::memory::desc to({n}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::a);
  dnnl::reorder reorder(dnnl::reorder::primitive_desc(engine, from, engine, to));
  dnnl::memory src(from, engine, x.data()), dst(to, engine, y.data());
  for (auto _ : state) {
    reorder.execute(stream, src, dst);
    stream.wait();
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * n * 6);
}
BENCHMARK(BM_OneDnnReorderToBf16)->Arg(kBenchTokens* kEmbed)->Arg(kBenchTokens* kHidden);

}  // namespace
}  // namespace tessel::kernels

// GEMM benchmarks (gemm.h) belong above this line, in their own section.

BENCHMARK_MAIN();
