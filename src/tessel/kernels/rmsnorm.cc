#include "tessel/kernels/rmsnorm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/partition.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kGammaTile = 2048;  // columns of dgamma partials held on the stack

inline float row_rstd(const float* x, int64_t cols, float eps) {
  const float mean_sq = row_sum_sq_dev(x, 0.0f, cols) / static_cast<float>(cols);
  return 1.0f / std::sqrt(mean_sq + eps);
}

double row_rstd_ref(const float* x, int64_t cols, float eps) {
  double sq = 0.0;
  for (int64_t c = 0; c < cols; ++c) sq += static_cast<double>(x[c]) * x[c];
  return 1.0 / std::sqrt(sq / cols + eps);
}

template <typename Out>
void rmsnorm_rows(const float* x, const float* gamma, Out* y, int64_t rows, int64_t cols,
                  float eps) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    Out* yr = y + r * cols;
    const float rstd = row_rstd(xr, cols, eps);
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) store_result(yr + c, (xr[c] * rstd) * gamma[c]);
  }
}

}  // namespace

void rmsnorm_forward(const float* x, const float* gamma, float* y, int64_t rows, int64_t cols,
                     float eps) {
  rmsnorm_rows(x, gamma, y, rows, cols, eps);
}

void rmsnorm_forward_to_bf16(const float* x, const float* gamma, uint16_t* y, int64_t rows,
                             int64_t cols, float eps) {
  rmsnorm_rows(x, gamma, y, rows, cols, eps);
}

void rmsnorm_forward_ref(const float* x, const float* gamma, float* y, int64_t rows, int64_t cols,
                         float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const double rstd = row_rstd_ref(x + r * cols, cols, eps);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>(x[r * cols + c] * rstd * gamma[c]);
  }
}

void rmsnorm_backward_input(const float* x, const float* gamma, const float* dy, float* dx,
                            int64_t rows, int64_t cols, float eps) {
  const float inv_cols = 1.0f / static_cast<float>(cols);
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dxr = dx + r * cols;
    const float rstd = row_rstd(xr, cols, eps);
    // sum(g * x) with g = dy * gamma, lane accumulators as in row_ops.h.
    float acc[kRowLanes] = {};
    int64_t c = 0;
    for (; c + kRowLanes <= cols; c += kRowLanes) {
#pragma omp simd
      for (int k = 0; k < kRowLanes; ++k)
        acc[k] = fmadd(dyr[c + k] * gamma[c + k], xr[c + k], acc[k]);
    }
    for (int k = 0; c < cols; ++c, ++k) acc[k] = fmadd(dyr[c] * gamma[c], xr[c], acc[k]);
    // mean(g * xhat) = rstd * mean(g * x)
    const float mean_gx = row_sum(acc, kRowLanes) * inv_cols * rstd;
#pragma omp simd
    for (int64_t j = 0; j < cols; ++j)
      dxr[j] = rstd * (dyr[j] * gamma[j] - (xr[j] * rstd) * mean_gx);
  }
}

void rmsnorm_backward_input_ref(const float* x, const float* gamma, const float* dy, float* dx,
                                int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const double rstd = row_rstd_ref(xr, cols, eps);
    double sum_gx = 0.0;
    for (int64_t c = 0; c < cols; ++c)
      sum_gx += static_cast<double>(dy[r * cols + c]) * gamma[c] * xr[c] * rstd;
    for (int64_t c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dy[r * cols + c]) * gamma[c];
      dx[r * cols + c] = static_cast<float>(rstd * (g - xr[c] * rstd * sum_gx / cols));
    }
  }
}

void rmsnorm_backward_gamma(const float* x, const float* dy, float* dgamma, int64_t rows,
                            int64_t cols, float eps) {
  if (cols == 0) return;
  if (rows == 0) {
    std::fill(dgamma, dgamma + cols, 0.0f);
    return;
  }
  // As layernorm_backward_params: threads split the columns (8-column groups);
  // each column sums all rows in one fixed order (kFoldRowBlock-row blocks
  // folded into a running total), so the thread count cannot change it.
#pragma omp parallel if (rows * cols > kParallelGrain)
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t groups = (cols + 7) / 8;
    const int64_t lo = std::min(cols, 8 * chunk_begin(thread, threads, groups));
    const int64_t hi = std::min(cols, 8 * chunk_begin(thread + 1, threads, groups));
    for (int64_t c0 = lo; c0 < hi; c0 += kGammaTile) {
      const int64_t w = std::min(kGammaTile, hi - c0);
      float pg[kGammaTile];
      for (int64_t b = 0; b < rows; b += kFoldRowBlock) {
        std::fill(pg, pg + w, 0.0f);
        for (int64_t r = b; r < std::min(rows, b + kFoldRowBlock); ++r) {
          const float rstd = row_rstd(x + r * cols, cols, eps);
          const float* xr = x + r * cols + c0;
          const float* dyr = dy + r * cols + c0;
#pragma omp simd
          for (int64_t c = 0; c < w; ++c) pg[c] = fmadd(dyr[c], xr[c] * rstd, pg[c]);
        }
        if (b == 0) {
          std::copy(pg, pg + w, dgamma + c0);
        } else {
#pragma omp simd
          for (int64_t c = 0; c < w; ++c) dgamma[c0 + c] += pg[c];
        }
      }
    }
  }
}

void rmsnorm_backward_gamma_ref(const float* x, const float* dy, float* dgamma, int64_t rows,
                                int64_t cols, float eps) {
  std::vector<double> g(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double rstd = row_rstd_ref(x + r * cols, cols, eps);
    for (int64_t c = 0; c < cols; ++c)
      g[c] += static_cast<double>(dy[r * cols + c]) * x[r * cols + c] * rstd;
  }
  for (int64_t c = 0; c < cols; ++c) dgamma[c] = static_cast<float>(g[c]);
}

}  // namespace tessel::kernels
