// Tests for the CPU kernels in src/tessel/kernels: every fast kernel against its
// `_ref` twin on random inputs (awkward sizes included), error messages, and
// determinism across runs and thread counts.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "common/kernel_checks.h"
#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/kernels/cross_entropy.h"
#include "tessel/kernels/dropout.h"
#include "tessel/kernels/elementwise.h"
#include "tessel/kernels/embedding.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/layernorm.h"
#include "tessel/kernels/optimizer.h"
#include "tessel/kernels/reduce.h"
#include "tessel/kernels/softmax.h"

namespace tessel::kernels {
namespace {

const int64_t kSizes[] = {1, 7, 33, 1000, 40000};

std::vector<int32_t> random_ids(int64_t n, int64_t bound, uint64_t seed) {
  PhiloxStream stream(seed, "kernels_test_ids");
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(stream.below(bound, i));
  return ids;
}

// ---- fast math ---------------------------------------------------------------

TEST(KernelsFastMath, MatchesLibmAcrossRange) {
  double worst_exp = 0, worst_log = 0, worst_tanh = 0, worst_sqrt = 0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * static_cast<float>(i) / 200000.0f;
    const double e = std::exp(static_cast<double>(x));
    worst_exp = std::max(worst_exp, std::fabs(fast_exp(x) - e) / e);
    const float t = -10.0f + 20.0f * static_cast<float>(i) / 200000.0f;
    const double th = std::tanh(static_cast<double>(t));
    if (th != 0) worst_tanh = std::max(worst_tanh, std::fabs(fast_tanh(t) - th) / std::fabs(th));
    const float p = std::exp(-90.0f + 180.0f * static_cast<float>(i) / 200000.0f);
    const double l = std::log(static_cast<double>(p));
    if (l != 0) worst_log = std::max(worst_log, std::fabs(fast_log(p) - l) / std::fabs(l));
    const double s = std::sqrt(static_cast<double>(p));
    worst_sqrt = std::max(worst_sqrt, std::fabs(fast_sqrt(p) - s) / s);
  }
  EXPECT_LT(worst_exp, 4e-7);
  EXPECT_LT(worst_log, 4e-7);
  EXPECT_LT(worst_tanh, 1e-6);
  EXPECT_LT(worst_sqrt, 2.5e-7);
}

TEST(KernelsFastMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(fast_exp(-inf), 0.0f);
  EXPECT_EQ(fast_exp(-100.0f), 0.0f);
  EXPECT_EQ(fast_exp(inf), inf);
  EXPECT_EQ(fast_exp(0.0f), 1.0f);
  EXPECT_TRUE(std::isnan(fast_exp(nan)));
  EXPECT_EQ(fast_log(0.0f), -inf);
  EXPECT_EQ(fast_log(1.0f), 0.0f);
  EXPECT_EQ(fast_log(inf), inf);
  EXPECT_TRUE(std::isnan(fast_log(-1.0f)));
  EXPECT_NEAR(fast_log(1e-40f), std::log(1e-40), 1e-4);  // denormal input
  EXPECT_EQ(fast_tanh(inf), 1.0f);
  EXPECT_EQ(fast_tanh(-inf), -1.0f);
  EXPECT_TRUE(std::isnan(fast_tanh(nan)));
  EXPECT_EQ(fast_sqrt(0.0f), 0.0f);
  EXPECT_EQ(fast_sqrt(inf), inf);
  EXPECT_EQ(fast_sqrt(4.0f), 2.0f);
  EXPECT_TRUE(std::isnan(fast_sqrt(-1.0f)));
}

// ---- elementwise -------------------------------------------------------------

using Unary = void (*)(const float*, float*, int64_t);
using UnaryGrad = void (*)(const float*, const float*, float*, int64_t);

void check_unary(Unary fast, Unary ref, float lo, float hi) {
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Vec x = random_vec(n, 11 + n, lo, hi);
    Vec got(n), want(n);
    fast(x.data(), got.data(), n);
    ref(x.data(), want.data(), n);
    expect_close(got, want);
  }
}

void check_unary_grad(UnaryGrad fast, UnaryGrad ref, float lo, float hi) {
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const Vec x = random_vec(n, 13 + n, lo, hi), dy = random_vec(n, 17 + n);
    Vec got(n), want(n);
    fast(x.data(), dy.data(), got.data(), n);
    ref(x.data(), dy.data(), want.data(), n);
    expect_close(got, want);
  }
}

TEST(KernelsElementwise, Gelu) {
  check_unary(gelu, gelu_ref, -8.0f, 8.0f);
  check_unary_grad(gelu_backward, gelu_backward_ref, -8.0f, 8.0f);
}

TEST(KernelsElementwise, GeluExtremeInputsAreFinite) {
  const Vec x = {-1e4f, -50.0f, -10.0f, 0.0f, 10.0f, 50.0f, 1e4f};
  Vec y(x.size()), dx(x.size()), dy(x.size(), 1.0f);
  gelu(x.data(), y.data(), x.size());
  gelu_backward(x.data(), dy.data(), dx.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_TRUE(std::isfinite(y[i])) << x[i];
    EXPECT_TRUE(std::isfinite(dx[i])) << x[i];
  }
  EXPECT_EQ(y.back(), 1e4f);
  EXPECT_EQ(dx.back(), 1.0f);
  EXPECT_NEAR(y.front(), 0.0f, 1e-30);
  EXPECT_NEAR(dx.front(), 0.0f, 1e-25);
}

TEST(KernelsElementwise, BiasGelu) {
  const int64_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {3, 1000}, {1024, 384}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1];
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const Vec x = random_vec(rows * cols, 1, -4.0f, 4.0f), bias = random_vec(cols, 2);
    const Vec dy = random_vec(rows * cols, 3);
    Vec got(rows * cols), want(rows * cols);
    bias_gelu(x.data(), bias.data(), got.data(), rows, cols);
    bias_gelu_ref(x.data(), bias.data(), want.data(), rows, cols);
    expect_close(got, want);
    bias_gelu_backward(x.data(), bias.data(), dy.data(), got.data(), rows, cols);
    bias_gelu_backward_ref(x.data(), bias.data(), dy.data(), want.data(), rows, cols);
    expect_close(got, want);
  }
}

TEST(KernelsElementwise, ReluExpLogTanhScale) {
  check_unary(relu, relu_ref, -1.0f, 1.0f);
  check_unary_grad(relu_backward, relu_backward_ref, -1.0f, 1.0f);
  check_unary(exp_forward, exp_forward_ref, -80.0f, 80.0f);
  check_unary(log_forward, log_forward_ref, 1e-30f, 1e30f);
  check_unary(log_forward, log_forward_ref, 0.5f, 2.0f);
  check_unary(tanh_forward, tanh_forward_ref, -3.0f, 3.0f);
  check_unary(tanh_forward, tanh_forward_ref, -0.01f, 0.01f);
  check_unary_grad(tanh_backward, tanh_backward_ref, -1.0f, 1.0f);
  for (int64_t n : kSizes) {
    const Vec x = random_vec(n, 5);
    Vec got(n), want(n);
    scale(x.data(), -0.37f, got.data(), n);
    scale_ref(x.data(), -0.37f, want.data(), n);
    expect_bitwise(got, want);
  }
}

TEST(KernelsElementwise, InPlace) {
  Vec x = random_vec(1000, 7, -3.0f, 3.0f);
  Vec want(x.size());
  gelu_ref(x.data(), want.data(), x.size());
  gelu(x.data(), x.data(), x.size());
  expect_close(x, want);
}

struct BinaryCase {
  std::vector<int64_t> sizes, a_strides, b_strides;
  int64_t a_numel, b_numel;
};

TEST(KernelsElementwise, BinaryBroadcasting) {
  const std::vector<BinaryCase> cases = {
      {{1000}, {1}, {1}, 1000, 1000},                            // contiguous
      {{40000}, {1}, {1}, 40000, 40000},                         // contiguous, parallel
      {{8, 128, 384}, {49152, 384, 1}, {0, 0, 1}, 393216, 384},  // bias suffix
      {{7, 33}, {33, 1}, {0, 0}, 231, 1},                        // b scalar
      {{7, 33}, {0, 1}, {33, 1}, 33, 231},                       // a broadcast rows
      {{5, 6, 7}, {42, 7, 1}, {7, 0, 1}, 210, 35},               // b broadcast middle dim
      {{6, 5}, {1, 6}, {5, 1}, 30, 30},                          // a transposed
      {{3, 1, 4, 5}, {20, 0, 5, 1}, {0, 0, 1, 4}, 60, 20},       // mixed, b transposed
      {{2, 3, 4, 5, 6}, {360, 120, 30, 6, 1}, {0, 6, 0, 1, 0}, 720, 30},
      {{}, {}, {}, 1, 1},                       // rank 0
      {{4, 0, 3}, {3, 3, 1}, {0, 0, 1}, 1, 3},  // empty
  };
  for (const BinaryCase& c : cases) {
    int64_t numel = 1;
    for (int64_t s : c.sizes) numel *= s;
    const Vec a = random_vec(c.a_numel, 21, -2.0f, 2.0f);
    const Vec b = random_vec(c.b_numel, 22, 0.5f, 2.0f);
    for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
      SCOPED_TRACE("rank " + std::to_string(c.sizes.size()) + " op " +
                   std::to_string(static_cast<int>(op)));
      Vec got(numel, -7.0f), want(numel, -7.0f);
      const int rank = static_cast<int>(c.sizes.size());
      binary(op, a.data(), c.a_strides.data(), b.data(), c.b_strides.data(), got.data(),
             c.sizes.data(), rank);
      binary_ref(op, a.data(), c.a_strides.data(), b.data(), c.b_strides.data(), want.data(),
                 c.sizes.data(), rank);
      expect_bitwise(got, want);
    }
  }
}

TEST(KernelsElementwise, ExpandBroadcastsAndPermutes) {
  const std::vector<BinaryCase> cases = {
      {{1000}, {1}, {}, 1000, 0},
      {{8, 128, 384}, {0, 0, 1}, {}, 384, 0},                 // broadcast a bias
      {{7, 33}, {0, 0}, {}, 1, 0},                            // fill
      {{33, 7}, {1, 33}, {}, 231, 0},                         // transpose
      {{8, 6, 128, 64}, {49152, 64, 384, 1}, {}, 393216, 0},  // (b, s, h, d) -> (b, h, s, d)
      {{4, 5, 6}, {1, 4, 20}, {}, 120, 0},                    // full reversal
      {{3, 1, 7}, {7, 0, 0}, {}, 21, 0},
  };
  for (const BinaryCase& c : cases) {
    int64_t numel = 1;
    for (int64_t s : c.sizes) numel *= s;
    const Vec x = random_vec(c.a_numel, 23);
    Vec got(numel), want(numel);
    const int rank = static_cast<int>(c.sizes.size());
    expand(x.data(), c.a_strides.data(), got.data(), c.sizes.data(), rank);
    expand_ref(x.data(), c.a_strides.data(), want.data(), c.sizes.data(), rank);
    expect_bitwise(got, want);
  }
}

// ---- reduce ------------------------------------------------------------------

// Fast vs ref for every op and, unless `masks` is given, every subset of reduced dims
// (bit d of a mask = dim d reduced).
void check_reduce(const std::vector<int64_t>& sizes, uint64_t seed, std::vector<int> masks = {}) {
  const int rank = static_cast<int>(sizes.size());
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  const Vec x = random_vec(numel, seed, -1.0f, 1.0f);
  if (masks.empty()) {
    for (int mask = 0; mask < (1 << rank); ++mask) masks.push_back(mask);
  }
  for (int mask : masks) {
    bool reduced[8];
    int64_t kept = 1, count = 1;
    for (int d = 0; d < rank; ++d) {
      reduced[d] = (mask >> d) & 1;
      (reduced[d] ? count : kept) *= sizes[d];
    }
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
      SCOPED_TRACE("mask " + std::to_string(mask) + " op " + std::to_string(static_cast<int>(op)));
      Vec got(kept), want(kept);
      reduce(op, x.data(), sizes.data(), rank, reduced, got.data());
      reduce_ref(op, x.data(), sizes.data(), rank, reduced, want.data());
      // Sums of +-1 values: error scales with the number of terms, not the result.
      const double magnitude = op == ReduceOp::kSum    ? std::sqrt(static_cast<double>(count))
                               : op == ReduceOp::kMean ? 1.0 / std::sqrt(static_cast<double>(count))
                                                       : 1.0;
      expect_close(got, want, 1e-5, 1e-6, magnitude);
      if (op == ReduceOp::kMax) {
        expect_bitwise(got, want);
        const Vec dy = random_vec(kept, seed + 1);
        Vec dx_got(numel, -1.0f), dx_want(numel, -1.0f);
        reduce_max_backward(x.data(), got.data(), dy.data(), sizes.data(), rank, reduced,
                            dx_got.data());
        reduce_max_backward_ref(x.data(), want.data(), dy.data(), sizes.data(), rank, reduced,
                                dx_want.data());
        expect_bitwise(dx_got, dx_want);
      }
    }
  }
}

TEST(KernelsReduce, AllDimSubsets) {
  check_reduce({7, 33, 5}, 31);
  check_reduce({1000}, 32);
  check_reduce({4, 1, 6, 1}, 33);
  check_reduce({2, 3, 4, 5}, 34);
  check_reduce({3, 2, 1, 5, 2}, 35);
  check_reduce({}, 36);
}

TEST(KernelsReduce, LargeLeadingTrailingMiddle) {
  check_reduce({8, 128, 384}, 37, {3, 4, 6, 7});  // bias gradient shape, per-row, ...
  check_reduce({3, 70000}, 38, {1, 2, 3});        // long rows, full reduction chunked
  check_reduce({5, 300, 1300}, 39, {2, 1});       // middle / leading, several column tiles
}

TEST(KernelsReduce, MaxTiesGoToFirstPosition) {
  // Values from {0, 1, 2}: many ties.
  const std::vector<int64_t> sizes = {6, 9, 40};
  Vec x(6 * 9 * 40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 3);
  for (int mask = 1; mask < 8; ++mask) {
    bool reduced[3] = {bool(mask & 1), bool(mask & 2), bool(mask & 4)};
    int64_t kept = 1;
    for (int d = 0; d < 3; ++d) kept *= reduced[d] ? 1 : sizes[d];
    Vec y(kept), dy = random_vec(kept, 40), got(x.size()), want(x.size());
    reduce(ReduceOp::kMax, x.data(), sizes.data(), 3, reduced, y.data());
    reduce_max_backward(x.data(), y.data(), dy.data(), sizes.data(), 3, reduced, got.data());
    reduce_max_backward_ref(x.data(), y.data(), dy.data(), sizes.data(), 3, reduced, want.data());
    expect_bitwise(got, want);
    int nonzero = 0;
    for (float g : got) nonzero += g != 0.0f;
    EXPECT_EQ(nonzero, kept);  // exactly one position per output
  }
  // Explicit: row (2, 5, 5) -> the gradient lands on index 1.
  const Vec row = {2.0f, 5.0f, 5.0f};
  const int64_t n[] = {3};
  const bool all[] = {true};
  float m, d = 1.0f;
  Vec dx(3);
  reduce(ReduceOp::kMax, row.data(), n, 1, all, &m);
  reduce_max_backward(row.data(), &m, &d, n, 1, all, dx.data());
  EXPECT_EQ(dx, (Vec{0.0f, 1.0f, 0.0f}));
}

TEST(KernelsReduce, MaxPropagatesNaNAndEmptyCases) {
  Vec x = random_vec(100, 41);
  x[37] = std::numeric_limits<float>::quiet_NaN();
  const int64_t sizes[] = {100};
  const bool all[] = {true};
  float y;
  reduce(ReduceOp::kMax, x.data(), sizes, 1, all, &y);
  EXPECT_TRUE(std::isnan(y));
  Vec dx(100);
  const float dy = 3.0f;
  reduce_max_backward(x.data(), &y, &dy, sizes, 1, all, dx.data());
  EXPECT_EQ(dx[37], 3.0f);

  const int64_t empty[] = {4, 0};
  const bool last[] = {false, true};
  Vec out(4, -1.0f);
  reduce(ReduceOp::kSum, x.data(), empty, 2, last, out.data());
  EXPECT_EQ(out, Vec(4, 0.0f));
  reduce(ReduceOp::kMean, x.data(), empty, 2, last, out.data());
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_THROW(reduce(ReduceOp::kMax, x.data(), empty, 2, last, out.data()), Error);
}

TEST(KernelsReduce, ThreadCountIndependent) {
  const std::vector<int64_t> sizes = {8, 128, 384};
  const Vec x = random_vec(8 * 128 * 384, 42);
  const bool leading[] = {true, true, false};
  const bool all[] = {true, true, true};
  expect_thread_independent([&] {
    Vec y(384 + 1);
    reduce(ReduceOp::kSum, x.data(), sizes.data(), 3, leading, y.data());
    reduce(ReduceOp::kSum, x.data(), sizes.data(), 3, all, y.data() + 384);
    return y;
  });
}

// ---- softmax -----------------------------------------------------------------

TEST(KernelsSoftmax, MatchesReference) {
  const int64_t shapes[][3] = {{1, 1, 1},     {5, 7, 1}, {3, 33, 1},   {2, 1000, 1},
                               {300, 128, 1}, {3, 7, 5}, {2, 33, 300}, {1, 4, 1000}};
  for (const auto& s : shapes) {
    const int64_t outer = s[0], n = s[1], inner = s[2], numel = outer * n * inner;
    for (float sc : {1.0f, 0.125f, -0.5f}) {
      SCOPED_TRACE(std::to_string(outer) + "x" + std::to_string(n) + "x" + std::to_string(inner) +
                   " scale " + std::to_string(sc));
      const Vec x = random_vec(numel, 51, -8.0f, 8.0f), dy = random_vec(numel, 52);
      Vec got(numel), want(numel);
      softmax_forward(x.data(), got.data(), outer, n, inner, sc, nullptr);
      softmax_forward_ref(x.data(), want.data(), outer, n, inner, sc, nullptr);
      expect_close(got, want);
      Vec dgot(numel), dwant(numel);
      softmax_backward(want.data(), dy.data(), dgot.data(), outer, n, inner, sc);
      softmax_backward_ref(want.data(), dy.data(), dwant.data(), outer, n, inner, sc);
      expect_close(dgot, dwant, 1e-5, 1e-6, 1.0);
    }
  }
}

TEST(KernelsSoftmax, CausalMask) {
  // Scores (batch 2, heads 3, query 37, key 37) and a layout with query_stride 2.
  const CausalMask masks[] = {{37, 1}, {37, 2}};
  const int64_t outers[] = {2 * 3 * 37, 2 * 37 * 2};
  for (int k = 0; k < 2; ++k) {
    const CausalMask mask = masks[k];
    const int64_t outer = outers[k], n = 37;
    Vec x = random_vec(outer * n, 53, -5.0f, 5.0f);
    Vec got(outer * n, -1.0f), want(outer * n, -1.0f);
    // Masked positions must not be read: poison them.
    for (int64_t r = 0; r < outer; ++r) {
      const int64_t q = (r / mask.query_stride) % mask.query_size;
      for (int64_t j = q + 1; j < n; ++j) x[r * n + j] = std::numeric_limits<float>::quiet_NaN();
    }
    softmax_forward(x.data(), got.data(), outer, n, 1, 0.125f, &mask);
    softmax_forward_ref(x.data(), want.data(), outer, n, 1, 0.125f, &mask);
    expect_close(got, want);
    for (int64_t r = 0; r < outer; ++r) {
      const int64_t q = (r / mask.query_stride) % mask.query_size;
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        if (j > q) {
          EXPECT_EQ(got[r * n + j], 0.0f);
        }
        sum += got[r * n + j];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
    const Vec dy = random_vec(outer * n, 54);
    Vec dgot(outer * n), dwant(outer * n);
    softmax_backward(got.data(), dy.data(), dgot.data(), outer, n, 1, 0.125f);
    softmax_backward_ref(got.data(), dy.data(), dwant.data(), outer, n, 1, 0.125f);
    expect_close(dgot, dwant, 1e-5, 1e-6, 1.0);
    for (int64_t r = 0; r < outer; ++r) {
      const int64_t q = (r / mask.query_stride) % mask.query_size;
      for (int64_t j = q + 1; j < n; ++j) EXPECT_EQ(dgot[r * n + j], 0.0f);
    }
  }
  const CausalMask mask{4, 1};
  Vec x(8), y(8);
  EXPECT_THROW(softmax_forward(x.data(), y.data(), 1, 4, 2, 1.0f, &mask), Error);
}

// ---- layernorm ---------------------------------------------------------------

TEST(KernelsLayerNorm, MatchesReference) {
  const int64_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {64, 1000}, {1024, 384}, {3, 5000}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], cols = s[1], numel = rows * cols;
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
    const Vec x = random_vec(numel, 61, -3.0f, 5.0f), dy = random_vec(numel, 62);
    const Vec gamma = random_vec(cols, 63, 0.5f, 1.5f), beta = random_vec(cols, 64);
    Vec got(numel), want(numel);
    layernorm_forward(x.data(), gamma.data(), beta.data(), got.data(), rows, cols, 1e-5f);
    layernorm_forward_ref(x.data(), gamma.data(), beta.data(), want.data(), rows, cols, 1e-5f);
    expect_close(got, want);
    layernorm_backward_input(x.data(), gamma.data(), dy.data(), got.data(), rows, cols, 1e-5f);
    layernorm_backward_input_ref(x.data(), gamma.data(), dy.data(), want.data(), rows, cols, 1e-5f);
    expect_close(got, want, 1e-5, 1e-6, 1.0);  // dx is O(1) even where it cancels to ~0
    Vec dg(cols, -1.0f), db(cols, -1.0f), dg_ref(cols), db_ref(cols);
    layernorm_backward_params(x.data(), dy.data(), dg.data(), db.data(), rows, cols, 1e-5f);
    layernorm_backward_params_ref(x.data(), dy.data(), dg_ref.data(), db_ref.data(), rows, cols,
                                  1e-5f);
    const double magnitude = std::sqrt(static_cast<double>(rows)) * 2.0;
    expect_close(dg, dg_ref, 1e-5, 1e-6, magnitude);
    expect_close(db, db_ref, 1e-5, 1e-6, magnitude);
  }
}

TEST(KernelsLayerNorm, ParamGradsThreadCountIndependent) {
  const int64_t rows = 1000, cols = 384;
  const Vec x = random_vec(rows * cols, 65), dy = random_vec(rows * cols, 66);
  expect_thread_independent([&] {
    Vec out(2 * cols);
    layernorm_backward_params(x.data(), dy.data(), out.data(), out.data() + cols, rows, cols,
                              1e-5f);
    return out;
  });
}

// ---- cross-entropy -----------------------------------------------------------

TEST(KernelsCrossEntropy, MatchesReference) {
  const int64_t shapes[][2] = {{1, 1}, {7, 33}, {33, 7}, {1024, 256}, {5, 50000}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], vocab = s[1];
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(vocab));
    const Vec logits = random_vec(rows * vocab, 71, -10.0f, 10.0f);
    const std::vector<int32_t> labels = random_ids(rows, vocab, 72);
    const float loss = cross_entropy_forward(logits.data(), labels.data(), rows, vocab);
    const float loss_ref = cross_entropy_forward_ref(logits.data(), labels.data(), rows, vocab);
    EXPECT_NEAR(loss, loss_ref, 1e-5 * std::fabs(loss_ref) + 1e-6);
    Vec got(rows * vocab), want(rows * vocab);
    cross_entropy_backward(logits.data(), labels.data(), 0.7f, got.data(), rows, vocab);
    cross_entropy_backward_ref(logits.data(), labels.data(), 0.7f, want.data(), rows, vocab);
    expect_close(got, want);
  }
}

TEST(KernelsCrossEntropy, BadLabelThrowsWithNumbers) {
  const Vec logits = random_vec(4 * 10, 73);
  const std::vector<int32_t> labels = {1, 2, 10, 3};
  Vec d(40);
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0) {
        cross_entropy_forward(logits.data(), labels.data(), 4, 10);
      } else {
        cross_entropy_backward(logits.data(), labels.data(), 1.0f, d.data(), 4, 10);
      }
      ADD_FAILURE() << "expected tessel::Error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("label 10"), std::string::npos) << what;
      EXPECT_NE(what.find("row 2"), std::string::npos) << what;
      EXPECT_NE(what.find("vocab size 10"), std::string::npos) << what;
    }
  }
  const std::vector<int32_t> negative = {0, -1, 0, 0};
  EXPECT_THROW(cross_entropy_forward(logits.data(), negative.data(), 4, 10), Error);
}

TEST(KernelsCrossEntropy, ThreadCountIndependent) {
  const int64_t rows = 1024, vocab = 256;
  const Vec logits = random_vec(rows * vocab, 74, -5.0f, 5.0f);
  const std::vector<int32_t> labels = random_ids(rows, vocab, 75);
  expect_thread_independent(
      [&] { return Vec{cross_entropy_forward(logits.data(), labels.data(), rows, vocab)}; });
}

// ---- embedding ---------------------------------------------------------------

TEST(KernelsEmbedding, MatchesReference) {
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 33, 5}, {1024, 256, 384}, {1000, 3, 7}};
  for (const auto& s : shapes) {
    const int64_t n = s[0], vocab = s[1], dim = s[2];
    const Vec table = random_vec(vocab * dim, 81), dout = random_vec(n * dim, 82);
    const std::vector<int32_t> ids = random_ids(n, vocab, 83);
    Vec got(n * dim), want(n * dim);
    embedding_forward(table.data(), ids.data(), got.data(), n, vocab, dim);
    embedding_forward_ref(table.data(), ids.data(), want.data(), n, vocab, dim);
    expect_bitwise(got, want);
    Vec dt(vocab * dim, -1.0f), dt_ref(vocab * dim);
    embedding_backward(ids.data(), dout.data(), dt.data(), n, vocab, dim);
    embedding_backward_ref(ids.data(), dout.data(), dt_ref.data(), n, vocab, dim);
    expect_bitwise(dt, dt_ref);
  }
}

TEST(KernelsEmbedding, BadIdThrowsBeforeWriting) {
  const Vec table = random_vec(5 * 3, 84);
  const std::vector<int32_t> ids = {0, 4, 7, 1};
  Vec out(4 * 3, -1.0f);
  try {
    embedding_forward(table.data(), ids.data(), out.data(), 4, 5, 3);
    ADD_FAILURE() << "expected tessel::Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("id 7"), std::string::npos) << what;
    EXPECT_NE(what.find("position 2"), std::string::npos) << what;
    EXPECT_NE(what.find("vocab size 5"), std::string::npos) << what;
  }
  EXPECT_EQ(out, Vec(12, -1.0f));
  EXPECT_THROW(embedding_backward(ids.data(), out.data(), out.data(), 4, 5, 3), Error);
}

TEST(KernelsEmbedding, BackwardThreadCountIndependent) {
  const int64_t n = 1024, vocab = 64, dim = 384;
  const Vec dout = random_vec(n * dim, 85);
  const std::vector<int32_t> ids = random_ids(n, vocab, 86);
  expect_thread_independent([&] {
    Vec dt(vocab * dim);
    embedding_backward(ids.data(), dout.data(), dt.data(), n, vocab, dim);
    return dt;
  });
}

// ---- dropout -----------------------------------------------------------------

TEST(KernelsDropout, MatchesReferenceAndIsItsOwnBackward) {
  for (int64_t n : kSizes) {
    const Vec x = random_vec(n, 91);
    Vec got(n), want(n);
    dropout(x.data(), got.data(), n, 0.1f, 1234, 99, 5, 17);
    dropout_ref(x.data(), want.data(), n, 0.1f, 1234, 99, 5, 17);
    expect_close(got, want);
    // Backward: the same call on dy keeps exactly the same elements.
    const Vec dy = random_vec(n, 92);
    Vec dx(n);
    dropout(dy.data(), dx.data(), n, 0.1f, 1234, 99, 5, 17);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(got[i] == 0.0f, dx[i] == 0.0f);
  }
  // A shard with index_offset matches the slice of the whole.
  const int64_t n = 5000;
  const Vec x = random_vec(n, 93, 1.0f, 2.0f);
  Vec whole(n), part(n - 1234);
  dropout(x.data(), whole.data(), n, 0.3f, 7, 8, 0, 0);
  dropout(x.data() + 1234, part.data(), n - 1234, 0.3f, 7, 8, 0, 1234);
  expect_bitwise(part, Vec(whole.begin() + 1234, whole.end()));
  int64_t kept = 0;
  for (float v : whole) kept += v != 0.0f;
  EXPECT_NEAR(static_cast<double>(kept) / n, 0.7, 0.03);
  // A strided call draws the elements at those indices: every third of the whole.
  Vec strided(n / 3), every_third(n / 3);
  for (int64_t i = 0; i < n / 3; ++i) every_third[i] = x[3 * i];
  dropout(every_third.data(), strided.data(), n / 3, 0.3f, 7, 8, 0, 0, 3);
  for (int64_t i = 0; i < n / 3; ++i) EXPECT_EQ(strided[i], whole[3 * i]) << i;
}

// The batched draw (vectorised Philox) is the one-at-a-time draw, bitwise:
// odd counts, strides, counters past 2^32 and lanes.
TEST(KernelsDropout, BatchedUniformsAreTheScalarOnes) {
  const PhiloxStream stream(77, "batched");
  for (const auto& [first, stride, n, lane] :
       {std::tuple<uint64_t, int64_t, int64_t, uint32_t>{0, 1, 1, 0},
        {5, 1, 17, 3},
        {(uint64_t{1} << 32) - 40, 3, 100, 1},
        {123456789012, 4097, 256, 0xFFFFFFFFu}}) {
    std::vector<float> got(n);
    stream.uniforms(first, stride, n, lane, got.data());
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], stream.uniform(first + static_cast<uint64_t>(i * stride), lane))
          << "first " << first << ", stride " << stride << ", element " << i;
  }
}

// The step is part of the key: consecutive steps drop different elements
// (about p(1-p) of them each way), and a step's mask is reproducible.
TEST(KernelsDropout, MaskChangesWithTheStep) {
  const int64_t n = 4096;
  const Vec x(n, 1.0f);
  Vec s0(n), s1(n), again(n), far(n);
  dropout(x.data(), s0.data(), n, 0.5f, 7, 8, 0, 0);
  dropout(x.data(), s1.data(), n, 0.5f, 7, 8, 1, 0);
  dropout(x.data(), again.data(), n, 0.5f, 7, 8, 1, 0);
  dropout(x.data(), far.data(), n, 0.5f, 7, 8, uint64_t{1} << 33, 0);
  expect_bitwise(again, s1);
  int64_t differ = 0, differ_far = 0;
  for (int64_t i = 0; i < n; ++i) {
    differ += (s0[i] == 0.0f) != (s1[i] == 0.0f);
    differ_far += (s0[i] == 0.0f) != (far[i] == 0.0f);
  }
  EXPECT_NEAR(static_cast<double>(differ) / n, 0.5, 0.05);
  EXPECT_NEAR(static_cast<double>(differ_far) / n, 0.5, 0.05);
}

TEST(KernelsDropout, EdgeProbabilities) {
  const Vec x = random_vec(100, 94);
  Vec y(100);
  dropout(x.data(), y.data(), 100, 0.0f, 1, 2, 3, 0);
  expect_bitwise(y, x);
  Vec inf(100, std::numeric_limits<float>::infinity());
  dropout(inf.data(), y.data(), 100, 1.0f, 1, 2, 3, 0);
  EXPECT_EQ(y, Vec(100, 0.0f));
  EXPECT_THROW(dropout(x.data(), y.data(), 100, 1.5f, 1, 2, 3, 0), Error);
  EXPECT_THROW(dropout(x.data(), y.data(), 100, -0.1f, 1, 2, 3, 0), Error);
}

// ---- optimizer ---------------------------------------------------------------

TEST(KernelsOptimizer, AdamWMatchesReference) {
  for (int64_t n : kSizes) {
    SCOPED_TRACE("n = " + std::to_string(n));
    Vec p = random_vec(n, 101), m(n, 0.0f), v(n, 0.0f);
    Vec p_ref = p, m_ref = m, v_ref = v;
    for (int64_t step = 1; step <= 3; ++step) {
      const Vec g = random_vec(n, 102 + step, -3.0f, 3.0f);
      adamw_update(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step,
                   0.5f);
      adamw_update_ref(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, 1e-3f, 0.9f, 0.95f,
                       1e-8f, 0.1f, step, 0.5f);
    }
    expect_close(m, m_ref);
    expect_close(v, v_ref);
    expect_close(p, p_ref);
  }
  Vec p(4), g(4), m(4), v(4);
  EXPECT_THROW(adamw_update(p.data(), g.data(), m.data(), v.data(), 4, 1e-3f, 0.9f, 0.95f, 1e-8f,
                            0.0f, 0, 1.0f),
               Error);
}

TEST(KernelsOptimizer, SgdAndSumOfSquares) {
  for (int64_t n : kSizes) {
    Vec p = random_vec(n, 111), p_ref = p;
    const Vec g = random_vec(n, 112);
    sgd_update(p.data(), g.data(), n, 0.1f, 0.01f, 2.0f);
    sgd_update_ref(p_ref.data(), g.data(), n, 0.1f, 0.01f, 2.0f);
    expect_close(p, p_ref);
    const double s = sum_of_squares(g.data(), n), s_ref = sum_of_squares_ref(g.data(), n);
    EXPECT_NEAR(s, s_ref, 1e-12 * s_ref);
  }
}

TEST(KernelsOptimizer, SumOfSquaresThreadCountIndependent) {
  const Vec x = random_vec(1 << 21, 113);
  expect_thread_independent([&] {
    const double s = sum_of_squares(x.data(), static_cast<int64_t>(x.size()));
    Vec bits(2);
    std::memcpy(bits.data(), &s, sizeof(s));
    return bits;
  });
}

}  // namespace
}  // namespace tessel::kernels
