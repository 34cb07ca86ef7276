// RMS normalisation over the last dim of a (rows, cols) tensor (Llama's
// RMSNorm), and its backward.
//
// y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps), the mean over each
// row. The statistics are f32 whatever the storage (bf16 runs read f32
// inputs and round only y). Nothing is saved between forward and backward:
// the backward kernels recompute rstd from x. The gamma gradient splits
// columns across threads and sums each column over rows in one fixed order,
// so it is bitwise identical for any thread count.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// x (rows, cols), gamma (cols) -> y (rows, cols). y may alias x. Out
// uint16_t stores y in bf16: round_to_bf16 of the f32 y, bit for bit.
template <typename Out>
void rmsnorm_forward(const float* x, const float* gamma, Out* y, int64_t rows, int64_t cols,
                     float eps);
void rmsnorm_forward_ref(const float* x, const float* gamma, float* y, int64_t rows, int64_t cols,
                         float eps);

// x (rows, cols), gamma (cols), dy (rows, cols) -> dx (rows, cols)
//   = rstd * (g - xhat * mean(g * xhat)), g = dy * gamma, xhat = x * rstd.
void rmsnorm_backward_input(const float* x, const float* gamma, const float* dy, float* dx,
                            int64_t rows, int64_t cols, float eps);
void rmsnorm_backward_input_ref(const float* x, const float* gamma, const float* dy, float* dx,
                                int64_t rows, int64_t cols, float eps);

// x (rows, cols), dy (rows, cols) -> dgamma (cols) = sum_rows dy * xhat. Overwrites dgamma.
void rmsnorm_backward_gamma(const float* x, const float* dy, float* dgamma, int64_t rows,
                            int64_t cols, float eps);
void rmsnorm_backward_gamma_ref(const float* x, const float* dy, float* dgamma, int64_t rows,
                                int64_t cols, float eps);

}  // namespace tessel::kernels
