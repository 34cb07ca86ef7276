#include "tessel/kernels/layernorm.h"

#include <cmath>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/partition.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kLayerNormTile = 2048;  // columns of dgamma/dbeta partials held on the stack

struct RowStats {
  float mean;
  float rstd;
};

// Two passes over the row (it is in L1 by the second): mean, then the biased
// variance about the mean, which does not cancel like E[x^2] - mean^2.
inline RowStats row_stats(const float* x, int64_t cols, float eps) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
  const float mean = row_sum(x, cols) * inv_cols;
  const float var = row_sum_sq_dev(x, mean, cols) * inv_cols;
  return {mean, 1.0f / std::sqrt(var + eps)};
}

struct RowStatsRef {
  double mean;
  double rstd;
};

RowStatsRef row_stats_ref(const float* x, int64_t cols, float eps) {
  double sum = 0.0;
  for (int64_t c = 0; c < cols; ++c) sum += x[c];
  const double mean = sum / cols;
  double sq = 0.0;
  for (int64_t c = 0; c < cols; ++c) sq += (x[c] - mean) * (x[c] - mean);
  return {mean, 1.0 / std::sqrt(sq / cols + eps)};
}

}  // namespace

template <typename Out>
void layernorm_forward(const float* x, const float* gamma, const float* beta, Out* y, int64_t rows,
                       int64_t cols, float eps) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    Out* yr = y + r * cols;
    const RowStats s = row_stats(xr, cols, eps);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c)
      store_result(yr + c, fmadd((xr[c] - s.mean) * s.rstd, gamma[c], beta[c]));
  }
}
template void layernorm_forward(const float*, const float*, const float*, float*, int64_t, int64_t,
                                float);
template void layernorm_forward(const float*, const float*, const float*, uint16_t*, int64_t,
                                int64_t, float);

void layernorm_forward_ref(const float* x, const float* gamma, const float* beta, float* y,
                           int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const RowStatsRef s = row_stats_ref(x + r * cols, cols, eps);
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (x[r * cols + c] - s.mean) * s.rstd;
      y[r * cols + c] = static_cast<float>(xhat * gamma[c] + beta[c]);
    }
  }
}

void layernorm_backward_input(const float* x, const float* gamma, const float* dy, float* dx,
                              int64_t rows, int64_t cols, float eps) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const RowStats s = row_stats(xr, cols, eps);
    // One pass for sum(g) and sum(g * xhat), lane accumulators as in row_ops.h.
    float acc_g[kRowLanes] = {}, acc_gx[kRowLanes] = {};
    int64_t c = 0;
    for (; c + kRowLanes <= cols; c += kRowLanes) {
#pragma omp simd
      for (int k = 0; k < kRowLanes; ++k) {
        const float g = dyr[c + k] * gamma[c + k];
        const float xhat = (xr[c + k] - s.mean) * s.rstd;
        acc_g[k] += g;
        acc_gx[k] = fmadd(g, xhat, acc_gx[k]);
      }
    }
    for (int k = 0; c < cols; ++c, ++k) {
      const float g = dyr[c] * gamma[c];
      acc_g[k] += g;
      acc_gx[k] = fmadd(g, (xr[c] - s.mean) * s.rstd, acc_gx[k]);
    }
    const float mean_g = row_sum(acc_g, kRowLanes) * inv_cols;
    const float mean_gx = row_sum(acc_gx, kRowLanes) * inv_cols;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j) {
      const float xhat = (xr[j] - s.mean) * s.rstd;
      dxr[j] = s.rstd * (dyr[j] * gamma[j] - mean_g - xhat * mean_gx);
    }
  }
}

void layernorm_backward_input_ref(const float* x, const float* gamma, const float* dy, float* dx,
                                  int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const RowStatsRef s = row_stats_ref(xr, cols, eps);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dy[r * cols + c]) * gamma[c];
      sum_g += g;
      sum_gx += g * (xr[c] - s.mean) * s.rstd;
    }
    for (int64_t c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dy[r * cols + c]) * gamma[c];
      const double xhat = (xr[c] - s.mean) * s.rstd;
      dx[r * cols + c] = static_cast<float>(s.rstd * (g - sum_g / cols - xhat * sum_gx / cols));
    }
  }
}

void layernorm_backward_params(const float* x, const float* dy, float* dgamma, float* dbeta,
                               int64_t rows, int64_t cols, float eps) {
  // Every thread recomputes the row stats for all rows (once per
  // kLayerNormTile columns it owns); a row-split would need scratch for partials.
  float* const out[2] = {dgamma, dbeta};
  fold_columns<2, kLayerNormTile>(rows, cols, out, [&](int64_t r, int64_t c0, int64_t w, auto& p) {
    const RowStats s = row_stats(x + r * cols, cols, eps);
    const float* xr = x + r * cols + c0;
    const float* dyr = dy + r * cols + c0;
#pragma omp simd
    for (int64_t c = 0; c < w; ++c) {
      p[0][c] = fmadd(dyr[c], (xr[c] - s.mean) * s.rstd, p[0][c]);
      p[1][c] += dyr[c];
    }
  });
}

void layernorm_backward_params_ref(const float* x, const float* dy, float* dgamma, float* dbeta,
                                   int64_t rows, int64_t cols, float eps) {
  std::vector<double> g(cols, 0.0), b(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const RowStatsRef s = row_stats_ref(x + r * cols, cols, eps);
    for (int64_t c = 0; c < cols; ++c) {
      const double d = dy[r * cols + c];
      g[c] += d * (x[r * cols + c] - s.mean) * s.rstd;
      b[c] += d;
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    dgamma[c] = static_cast<float>(g[c]);
    dbeta[c] = static_cast<float>(b[c]);
  }
}

}  // namespace tessel::kernels
