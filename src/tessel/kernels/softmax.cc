#include "tessel/kernels/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/partition.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kSoftmaxTile = 256;  // inner columns per stack accumulator

void check_mask(const CausalMask* mask, int64_t inner) {
  if (mask == nullptr) return;
  TS_CHECK(inner == 1, "causal softmax needs inner == 1, got inner ", inner);
  TS_CHECK(mask->query_size >= 1 && mask->query_stride >= 1, "bad causal mask: query_size ",
           mask->query_size, ", query_stride ", mask->query_stride);
}

// Number of unmasked leading elements of row r.
inline int64_t row_limit(const CausalMask* mask, int64_t r, int64_t n) {
  if (mask == nullptr) return n;
  return std::min(n, (r / mask->query_stride) % mask->query_size + 1);
}

}  // namespace

void softmax_forward(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, float scale,
                     const CausalMask* mask) {
  check_mask(mask, inner);
  if (outer * n * inner == 0) return;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * n > kParallelGrain)
    for (int64_t r = 0; r < outer; ++r) {
      const float* xr = x + r * n;
      float* yr = y + r * n;
      const int64_t limit = row_limit(mask, r, n);
      const float m = row_scaled_max(xr, scale, limit);
      const float sum = row_exp_sum(xr, scale, m, yr, limit);
      const float inv = 1.0f / sum;
#pragma omp simd
      for (int64_t j = 0; j < limit; ++j) yr[j] *= inv;
      std::fill(yr + limit, yr + n, 0.0f);
    }
    return;
  }
  // inner > 1: each (outer, column tile) keeps its running max and sum on the stack.
  const int64_t tiles = (inner + kSoftmaxTile - 1) / kSoftmaxTile;
#pragma omp parallel for schedule(static) if (outer * n * inner > kParallelGrain)
  for (int64_t it = 0; it < outer * tiles; ++it) {
    const int64_t o = it / tiles, c0 = (it % tiles) * kSoftmaxTile,
                  w = std::min(kSoftmaxTile, inner - c0);
    const float* xo = x + o * n * inner + c0;
    float* yo = y + o * n * inner + c0;
    float m[kSoftmaxTile], sum[kSoftmaxTile];
    std::fill(m, m + w, -std::numeric_limits<float>::infinity());
    std::fill(sum, sum + w, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float* xj = xo + j * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) {
        const float v = scale * xj[i];
        m[i] = v > m[i] ? v : m[i];
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* xj = xo + j * inner;
      float* yj = yo + j * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) {
        const float e = fast_exp(fmadd(scale, xj[i], -m[i]));
        yj[i] = e;
        sum[i] += e;
      }
    }
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) sum[i] = 1.0f / sum[i];
    for (int64_t j = 0; j < n; ++j) {
      float* yj = yo + j * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) yj[i] *= sum[i];
    }
  }
}

void softmax_forward_ref(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                         float scale, const CausalMask* mask) {
  check_mask(mask, inner);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t limit = row_limit(mask, o, n);
      auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double m = -INFINITY;
      for (int64_t j = 0; j < limit; ++j) m = std::max(m, static_cast<double>(scale * x[at(j)]));
      double sum = 0.0;
      for (int64_t j = 0; j < limit; ++j)
        sum += std::exp(static_cast<double>(scale * x[at(j)]) - m);
      for (int64_t j = 0; j < n; ++j)
        y[at(j)] =
            j < limit
                ? static_cast<float>(std::exp(static_cast<double>(scale * x[at(j)]) - m) / sum)
                : 0.0f;
    }
  }
}

template <typename Out>
void softmax_backward(const float* y, const float* dy, Out* dx, int64_t outer, int64_t n,
                      int64_t inner, float scale) {
  if (outer * n * inner == 0) return;
  if (inner == 1) {
#pragma omp parallel for schedule(static) if (outer * n > kParallelGrain)
    for (int64_t r = 0; r < outer; ++r) {
      const float* yr = y + r * n;
      const float* dyr = dy + r * n;
      Out* dxr = dx + r * n;
      const float dot = row_dot(yr, dyr, n);
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) store_result(dxr + j, scale * yr[j] * (dyr[j] - dot));
    }
    return;
  }
  const int64_t tiles = (inner + kSoftmaxTile - 1) / kSoftmaxTile;
#pragma omp parallel for schedule(static) if (outer * n * inner > kParallelGrain)
  for (int64_t it = 0; it < outer * tiles; ++it) {
    const int64_t o = it / tiles, c0 = (it % tiles) * kSoftmaxTile,
                  w = std::min(kSoftmaxTile, inner - c0);
    const int64_t base = o * n * inner + c0;
    float dot[kSoftmaxTile];
    std::fill(dot, dot + w, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      const float* yj = y + base + j * inner;
      const float* dyj = dy + base + j * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) dot[i] = fmadd(yj[i], dyj[i], dot[i]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* yj = y + base + j * inner;
      const float* dyj = dy + base + j * inner;
      Out* dxj = dx + base + j * inner;
#pragma omp simd
      for (int64_t i = 0; i < w; ++i) store_result(dxj + i, scale * yj[i] * (dyj[i] - dot[i]));
    }
  }
}
template void softmax_backward(const float*, const float*, float*, int64_t, int64_t, int64_t,
                               float);
template void softmax_backward(const float*, const float*, uint16_t*, int64_t, int64_t, int64_t,
                               float);

void softmax_backward_ref(const float* y, const float* dy, float* dx, int64_t outer, int64_t n,
                          int64_t inner, float scale) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t j) { return (o * n + j) * inner + i; };
      double dot = 0.0;
      for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(y[at(j)]) * dy[at(j)];
      for (int64_t j = 0; j < n; ++j)
        dx[at(j)] = static_cast<float>(scale * y[at(j)] * (dy[at(j)] - dot));
    }
  }
}

}  // namespace tessel::kernels
