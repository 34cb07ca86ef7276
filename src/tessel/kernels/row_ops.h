// Vectorised reductions over one contiguous row of floats.
//
// Each helper keeps kRowLanes independent accumulators (four AVX2 registers),
// walks the row in order and combines the lanes in a fixed tree, so its result
// depends only on the data and the binary, never on threading. The max helpers
// ignore NaN (callers that must propagate NaN track it themselves).
#pragma once

#include <cstdint>
#include <limits>

#include "tessel/kernels/fast_math.h"

namespace tessel::kernels {

inline constexpr int kRowLanes = 32;

namespace row_detail {

// buf[k] = k < rem ? x[k] : fill for k < kRowLanes, never reading x[rem..]. GCC
// turns the conditional read into a masked vector load, so the tail is handled
// by one more full-width step with no scalar loop and no store-forwarding stall.
inline void load_tail(const float* x, int64_t rem, float fill, float* buf) {
#pragma omp simd
  for (int k = 0; k < kRowLanes; ++k) buf[k] = k < rem ? x[k] : fill;
}

inline float combine_sum(float* acc) {
  for (int width = kRowLanes / 2; width >= 1; width /= 2) {
    for (int k = 0; k < width; ++k) acc[k] += acc[k + width];
  }
  return acc[0];
}

// The row's extreme by `pick(v, acc)` (v where it beats acc, else acc),
// padded with `fill` (pick's identity) and combined in the fixed tree.
template <typename Pick>
inline float extreme(const float* x, int64_t n, float fill, Pick pick) {
  float acc[kRowLanes];
  for (int k = 0; k < kRowLanes; ++k) acc[k] = fill;
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) acc[k] = pick(x[i + k], acc[k]);
  }
  if (i < n) {
    float buf[kRowLanes];
    load_tail(x + i, n - i, fill, buf);
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) acc[k] = pick(buf[k], acc[k]);
  }
  for (int width = kRowLanes / 2; width >= 1; width /= 2) {
    for (int k = 0; k < width; ++k) acc[k] = pick(acc[k + width], acc[k]);
  }
  return acc[0];
}

// The row's sum of `add(acc, v)` terms from 0, padded with `fill` (whose
// term is 0) and combined in the fixed tree.
template <typename Add>
inline float sum_terms(const float* x, int64_t n, float fill, Add add) {
  float acc[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) acc[k] = add(acc[k], x[i + k]);
  }
  if (i < n) {
    float buf[kRowLanes];
    load_tail(x + i, n - i, fill, buf);
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) acc[k] = add(acc[k], buf[k]);
  }
  return combine_sum(acc);
}

}  // namespace row_detail

// x (n) -> sum_i x[i]
inline float row_sum(const float* x, int64_t n) {
  return row_detail::sum_terms(x, n, 0.0f, [](float acc, float v) { return acc + v; });
}

// x (n) -> sum_i (x[i] - shift)^2
inline float row_sum_sq_dev(const float* x, float shift, int64_t n) {
  return row_detail::sum_terms(x, n, shift, [shift](float acc, float v) {
    const float d = v - shift;
    return fmadd(d, d, acc);
  });
}

// a (n), b (n) -> sum_i a[i] b[i]
inline float row_dot(const float* a, const float* b, int64_t n) {
  float acc[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) acc[k] = fmadd(a[i + k], b[i + k], acc[k]);
  }
  if (i < n) {
    float abuf[kRowLanes], bbuf[kRowLanes];
    row_detail::load_tail(a + i, n - i, 0.0f, abuf);
    row_detail::load_tail(b + i, n - i, 0.0f, bbuf);
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) acc[k] = fmadd(abuf[k], bbuf[k], acc[k]);
  }
  return row_detail::combine_sum(acc);
}

// x (n) -> max_i x[i] (NaN ignored; -inf for n == 0)
inline float row_max(const float* x, int64_t n) {
  return row_detail::extreme(x, n, -std::numeric_limits<float>::infinity(),
                             [](float v, float acc) { return v > acc ? v : acc; });
}

// x (n) -> min_i x[i] (NaN ignored; +inf for n == 0)
inline float row_min(const float* x, int64_t n) {
  return row_detail::extreme(x, n, std::numeric_limits<float>::infinity(),
                             [](float v, float acc) { return v < acc ? v : acc; });
}

// max_i (scale * x[i]) for x (n), exactly: rounding is monotonic, so this is
// scale * max(x) for scale >= 0 and scale * min(x) otherwise.
inline float row_scaled_max(const float* x, float scale, int64_t n) {
  return scale >= 0.0f ? scale * row_max(x, n) : scale * row_min(x, n);
}

namespace row_detail {

// exp(scale * x - shift) over x (n), optionally stored to y, summed. The tail
// takes one more full-width step on a padded buffer (lanes past n contribute 0
// and are not stored), so no exp is ever computed by scalar code.
template <bool kStore>
inline float exp_sum(const float* x, float scale, float shift, float* y, int64_t n) {
  float acc[kRowLanes] = {};
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) {
      const float e = fast_exp(fmadd(scale, x[i + k], -shift));
      if constexpr (kStore) y[i + k] = e;
      acc[k] += e;
    }
  }
  if (i < n) {
    const int64_t rem = n - i;
    float buf[kRowLanes];
    load_tail(x + i, rem, 0.0f, buf);
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) {
      const float e = blend(k < rem, fast_exp(fmadd(scale, buf[k], -shift)), 0.0f);
      if constexpr (kStore) {
        if (k < rem) y[i + k] = e;
      }
      acc[k] += e;
    }
  }
  return combine_sum(acc);
}

}  // namespace row_detail

// x (n) -> y (n) = exp(scale * x - shift), returns sum_i y[i].
inline float row_exp_sum(const float* x, float scale, float shift, float* y, int64_t n) {
  return row_detail::exp_sum<true>(x, scale, shift, y, n);
}

// x (n) -> sum_i exp(scale * x[i] - shift)
inline float row_exp_sum(const float* x, float scale, float shift, int64_t n) {
  return row_detail::exp_sum<false>(x, scale, shift, nullptr, n);
}

}  // namespace tessel::kernels
