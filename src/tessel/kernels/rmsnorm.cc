#include "tessel/kernels/rmsnorm.h"

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

}  // namespace

template <typename Out>
void rmsnorm_forward(const float* x, const float* gamma, Out* y, int64_t rows, int64_t cols,
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
template void rmsnorm_forward(const float*, const float*, float*, int64_t, int64_t, float);
template void rmsnorm_forward(const float*, const float*, uint16_t*, int64_t, int64_t, float);

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
  float* const out[1] = {dgamma};
  fold_columns<1, kGammaTile>(rows, cols, out, [&](int64_t r, int64_t c0, int64_t w, auto& p) {
    const float rstd = row_rstd(x + r * cols, cols, eps);
    const float* xr = x + r * cols + c0;
    const float* dyr = dy + r * cols + c0;
#pragma omp simd
    for (int64_t c = 0; c < w; ++c) p[0][c] = fmadd(dyr[c], xr[c] * rstd, p[0][c]);
  });
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
