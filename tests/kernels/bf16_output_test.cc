// The kernels' bf16 outputs (a bf16 program's producers of bf16-stored values)
// against their f32 outputs: the bf16 output must be round_to_bf16 of the f32
// output, bit for bit, on every code path (contiguous, bias-broadcast and
// strided binary ops; softmax's row and tiled backward), with values spanning
// many binades so ties and carries into the exponent occur.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/random_values.h"
#include "tessel/base/bf16.h"
#include "tessel/kernels/elementwise.h"
#include "tessel/kernels/layernorm.h"
#include "tessel/kernels/softmax.h"

namespace tessel::kernels {
namespace {

// Uniform values scaled by powers of two from 2^-6 to 2^6.
std::vector<float> spread_values(int64_t n, uint32_t seed) {
  std::vector<float> v = random_values(n, seed);
  for (int64_t i = 0; i < n; ++i) v[i] *= static_cast<float>(1 << (i % 13)) / 64.0f;
  return v;
}

std::vector<uint16_t> rounded(const std::vector<float>& f32) {
  std::vector<uint16_t> out(f32.size());
  round_to_bf16(f32.data(), out.data(), static_cast<int64_t>(f32.size()));
  return out;
}

TEST(Bf16Output, BiasGeluRoundsTheF32Result) {
  const int64_t rows = 37, cols = 70;
  const auto x = spread_values(rows * cols, 1), bias = random_values(cols, 2);
  std::vector<float> f32(rows * cols);
  std::vector<uint16_t> bf16(rows * cols, 0xffff);
  bias_gelu(x.data(), bias.data(), f32.data(), rows, cols);
  bias_gelu(x.data(), bias.data(), bf16.data(), rows, cols);
  EXPECT_EQ(bf16, rounded(f32));
}

TEST(Bf16Output, LayerNormRoundsTheF32Result) {
  const int64_t rows = 33, cols = 96;
  const auto x = spread_values(rows * cols, 3);
  const auto gamma = random_values(cols, 4), beta = random_values(cols, 5);
  std::vector<float> f32(rows * cols);
  std::vector<uint16_t> bf16(rows * cols, 0xffff);
  layernorm_forward(x.data(), gamma.data(), beta.data(), f32.data(), rows, cols, 1e-5f);
  layernorm_forward(x.data(), gamma.data(), beta.data(), bf16.data(), rows, cols, 1e-5f);
  EXPECT_EQ(bf16, rounded(f32));
}

TEST(Bf16Output, SoftmaxBackwardRoundsTheF32ResultOnBothPaths) {
  const int64_t outer = 6, n = 19;
  for (int64_t inner : {int64_t{1}, int64_t{300}}) {  // per-row dot; tiled columns
    const int64_t numel = outer * n * inner;
    const auto y = random_values(numel, 6), dy = spread_values(numel, 7);
    std::vector<float> f32(numel);
    std::vector<uint16_t> bf16(numel, 0xffff);
    softmax_backward(y.data(), dy.data(), f32.data(), outer, n, inner, 0.5f);
    softmax_backward(y.data(), dy.data(), bf16.data(), outer, n, inner, 0.5f);
    EXPECT_EQ(bf16, rounded(f32)) << "inner " << inner;
  }
}

TEST(Bf16Output, BinaryOpsRoundTheF32ResultOnEveryPath) {
  const int64_t sizes[] = {4, 5, 24};
  const auto a = spread_values(4 * 5 * 24, 8), b = spread_values(4 * 5 * 24, 9);
  struct Strides {
    const char* name;
    int64_t a[3], b[3];
  };
  const Strides cases[] = {
      {"contiguous", {120, 24, 1}, {120, 24, 1}},
      {"bias broadcast", {120, 24, 1}, {0, 0, 1}},
      {"transposed b", {120, 24, 1}, {1, 4, 20}},
      {"scalar a", {0, 0, 0}, {120, 24, 1}},
  };
  for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
    for (const Strides& c : cases) {
      std::vector<float> f32(4 * 5 * 24);
      std::vector<uint16_t> bf16(f32.size(), 0xffff);
      binary(op, a.data(), c.a, b.data(), c.b, f32.data(), sizes, 3);
      binary(op, a.data(), c.a, b.data(), c.b, bf16.data(), sizes, 3);
      EXPECT_EQ(bf16, rounded(f32)) << c.name << " op " << static_cast<int>(op);
    }
  }
}

}  // namespace
}  // namespace tessel::kernels
