// The Llama family's CPU kernels: sigmoid, SiLU, square roots,
// RMSNorm and rotary positions, each fast kernel against its `_ref` twin
// (double) on random inputs of awkward sizes, bitwise independence from
// the thread count, RMSNorm's bf16 writer against rounding its f32 output,
// and the rotary identities the model relies on (the inverse undoes the
// rotation; a shard with a position offset computes its slice of the whole).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/kernel_checks.h"
#include "tessel/base/bf16.h"
#include "tessel/kernels/rmsnorm.h"
#include "tessel/kernels/rotary.h"
#include "tessel/kernels/unary_math.h"

namespace tessel::kernels {
namespace {

const int64_t kLlamaSizes[] = {1, 7, 33, 1000, 40000};

using LlamaUnaryKernel = void (*)(const float*, float*, int64_t);
using LlamaGradKernel = void (*)(const float*, const float*, float*, int64_t);

void check_llama_unary(LlamaUnaryKernel fast, LlamaUnaryKernel ref, float lo, float hi,
                       uint64_t seed) {
  for (int64_t n : kLlamaSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Vec x = random_vec(n, seed, lo, hi);
    Vec got(n), want(n);
    fast(x.data(), got.data(), n);
    ref(x.data(), want.data(), n);
    expect_close(got, want, 1e-6, 0.0);
    expect_thread_independent([&] {
      Vec y(n);
      fast(x.data(), y.data(), n);
      return y;
    });
  }
}

void check_llama_grad(LlamaGradKernel fast, LlamaGradKernel ref, float lo, float hi,
                      uint64_t seed) {
  for (int64_t n : kLlamaSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Vec x = random_vec(n, seed, lo, hi), dy = random_vec(n, seed + 1);
    Vec got(n), want(n);
    fast(x.data(), dy.data(), got.data(), n);
    ref(x.data(), dy.data(), want.data(), n);
    expect_close(got, want, 1e-5, 1e-7);
  }
}

TEST(KernelsLlama, SigmoidSiluSqrtRsqrtMatchReference) {
  check_llama_unary(sigmoid_forward, sigmoid_forward_ref, -20.0f, 20.0f, 1);
  check_llama_unary(silu_forward, silu_forward_ref, -20.0f, 20.0f, 2);
  check_llama_unary(sqrt_forward, sqrt_forward_ref, 1e-6f, 1e4f, 3);
  check_llama_unary(rsqrt_forward, rsqrt_forward_ref, 1e-6f, 1e4f, 4);
  check_llama_grad(sigmoid_backward, sigmoid_backward_ref, 0.0f, 1.0f, 5);  // takes y in [0, 1]
  check_llama_grad(silu_backward, silu_backward_ref, -20.0f, 20.0f, 6);
}

TEST(KernelsLlama, SigmoidAndSiluSaturate) {
  const Vec x = {-200.0f, -90.0f, 0.0f, 90.0f, 200.0f};
  Vec s(5), y(5);
  sigmoid_forward(x.data(), s.data(), 5);
  silu_forward(x.data(), y.data(), 5);
  EXPECT_EQ(s, (Vec{0.0f, 0.0f, 0.5f, 1.0f, 1.0f}));
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], 90.0f);
  EXPECT_EQ(y[4], 200.0f);
  EXPECT_LE(std::fabs(y[0]), 1e-30f);
}

TEST(KernelsLlama, RmsNormMatchesReference) {
  const int64_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {64, 1000}, {1024, 384}, {3, 5000}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1], numel = rows * cols;
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const Vec x = random_vec(numel, 61, -3.0f, 5.0f), dy = random_vec(numel, 62);
    const Vec gamma = random_vec(cols, 63, 0.5f, 1.5f);
    Vec got(numel), want(numel);
    rmsnorm_forward(x.data(), gamma.data(), got.data(), rows, cols, 1e-5f);
    rmsnorm_forward_ref(x.data(), gamma.data(), want.data(), rows, cols, 1e-5f);
    expect_close(got, want);
    rmsnorm_backward_input(x.data(), gamma.data(), dy.data(), got.data(), rows, cols, 1e-5f);
    rmsnorm_backward_input_ref(x.data(), gamma.data(), dy.data(), want.data(), rows, cols, 1e-5f);
    expect_close(got, want, 1e-5, 1e-6, 1.0);
    Vec dg(cols, -1.0f), dg_ref(cols);
    rmsnorm_backward_gamma(x.data(), dy.data(), dg.data(), rows, cols, 1e-5f);
    rmsnorm_backward_gamma_ref(x.data(), dy.data(), dg_ref.data(), rows, cols, 1e-5f);
    expect_close(dg, dg_ref, 1e-5, 1e-6, std::sqrt(static_cast<double>(rows)) * 2.0);
  }
}

TEST(KernelsLlama, RmsNormThreadCountIndependent) {
  const int64_t rows = 1000, cols = 384;
  const Vec x = random_vec(rows * cols, 65), dy = random_vec(rows * cols, 66);
  const Vec gamma = random_vec(cols, 67);
  expect_thread_independent([&] {
    Vec out(cols + 2 * rows * cols);
    rmsnorm_backward_gamma(x.data(), dy.data(), out.data(), rows, cols, 1e-5f);
    rmsnorm_forward(x.data(), gamma.data(), out.data() + cols, rows, cols, 1e-5f);
    rmsnorm_backward_input(x.data(), gamma.data(), dy.data(), out.data() + cols + rows * cols, rows,
                           cols, 1e-5f);
    return out;
  });
}

TEST(KernelsLlama, RmsNormBf16RoundsTheF32Result) {
  const int64_t rows = 33, cols = 96;
  const Vec x = random_vec(rows * cols, 68, -40.0f, 40.0f), gamma = random_vec(cols, 69);
  Vec f32(rows * cols);
  std::vector<uint16_t> bf16(rows * cols, 0xffff), want(rows * cols);
  rmsnorm_forward(x.data(), gamma.data(), f32.data(), rows, cols, 1e-5f);
  rmsnorm_forward(x.data(), gamma.data(), bf16.data(), rows, cols, 1e-5f);
  round_to_bf16(f32.data(), want.data(), rows * cols);
  EXPECT_EQ(bf16, want);
}

// (outer, positions, heads, cols): the model's (batch, seq, heads, head).
RotaryView rotary_view_of(int64_t outer, int64_t positions, int64_t heads, int64_t cols) {
  return RotaryView{outer, positions, heads * cols, cols, 0, 10000.0f, false, RotaryScaling{}};
}

Vec rotated(const Vec& x, const RotaryView& v) {
  Vec y(x.size()), table(rotary_table_floats(v));
  rotary(x.data(), y.data(), v, table.data());
  return y;
}

TEST(KernelsLlama, RotaryMatchesReferenceAndItsInverseUndoesIt) {
  for (const RotaryView& v :
       {rotary_view_of(1, 1, 1, 2), rotary_view_of(2, 7, 3, 8), rotary_view_of(3, 129, 4, 64)}) {
    SCOPED_TRACE(std::to_string(v.positions) + " positions, " + std::to_string(v.cols) + " cols");
    const int64_t n = v.outer * v.positions * v.inner;
    const Vec x = random_vec(n, 70);
    Vec want(n);
    rotary_ref(x.data(), want.data(), v);
    const Vec got = rotated(x, v);
    expect_close(got, want, 1e-5, 1e-6);
    RotaryView inverse = v;
    inverse.inverse = true;
    expect_close(rotated(got, inverse), x, 1e-5, 1e-6);
    // A pair's norm is kept, and position 0 is not turned.
    for (int64_t e = 0; e < v.inner; ++e) EXPECT_EQ(got[e], x[e]);
    expect_thread_independent([&] { return rotated(x, v); });
  }
}

TEST(KernelsLlama, RotaryWithLlama31ScalingMatchesReference) {
  RotaryView v = rotary_view_of(2, 300, 2, 64);
  v.theta = 500000.0f;
  v.scaling = RotaryScaling{8, 1, 4, 64};  // a short original context puts bands in range
  const int64_t n = v.outer * v.positions * v.inner;
  const Vec x = random_vec(n, 72);
  Vec want(n);
  rotary_ref(x.data(), want.data(), v);
  expect_close(rotated(x, v), want, 1e-5, 1e-6);
  RotaryView plain = v;
  plain.scaling = RotaryScaling{};
  EXPECT_NE(rotated(x, plain), rotated(x, v));  // the scaling changes the low frequencies
}

TEST(KernelsLlama, RotaryShardWithOffsetIsTheSliceOfTheWhole) {
  const RotaryView whole = rotary_view_of(2, 12, 2, 16);
  const Vec x = random_vec(whole.outer * whole.positions * whole.inner, 71);
  const Vec all = rotated(x, whole);
  // Positions [4, 8) of each outer row, as a sequence shard sees them.
  RotaryView shard = whole;
  shard.positions = 4;
  shard.offset = 4;
  Vec part, want;
  for (int64_t o = 0; o < whole.outer; ++o) {
    const int64_t begin = (o * whole.positions + 4) * whole.inner;
    part.insert(part.end(), x.begin() + begin, x.begin() + begin + 4 * whole.inner);
    want.insert(want.end(), all.begin() + begin, all.begin() + begin + 4 * whole.inner);
  }
  expect_bitwise(rotated(part, shard), want);
}

}  // namespace
}  // namespace tessel::kernels
