// Layer normalisation over the last dim of a (rows, cols) tensor, and its
// backward.
//
// y = (x - mean) * rstd * gamma + beta, with mean and the biased variance taken
// over each row and rstd = 1 / sqrt(var + eps). Nothing is saved between forward
// and backward: the backward kernels recompute mean and rstd from x. The
// parameter gradients split columns across threads and sum each column over rows
// in one fixed order, so they are bitwise identical for any thread count.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// x (rows, cols), gamma (cols), beta (cols) -> y (rows, cols). y may alias x.
// Out uint16_t stores y in bf16: round_to_bf16 of the f32 y, bit for bit,
// written once (base/bf16.h store_result).
template <typename Out>
void layernorm_forward(const float* x, const float* gamma, const float* beta, Out* y, int64_t rows,
                       int64_t cols, float eps);
void layernorm_forward_ref(const float* x, const float* gamma, const float* beta, float* y,
                           int64_t rows, int64_t cols, float eps);

// x (rows, cols), gamma (cols), dy (rows, cols) -> dx (rows, cols)
//   = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, means over cols.
void layernorm_backward_input(const float* x, const float* gamma, const float* dy, float* dx,
                              int64_t rows, int64_t cols, float eps);
void layernorm_backward_input_ref(const float* x, const float* gamma, const float* dy, float* dx,
                                  int64_t rows, int64_t cols, float eps);

// x (rows, cols), dy (rows, cols) -> dgamma (cols) = sum_rows dy * xhat,
//   dbeta (cols) = sum_rows dy. Overwrites dgamma and dbeta.
void layernorm_backward_params(const float* x, const float* dy, float* dgamma, float* dbeta,
                               int64_t rows, int64_t cols, float eps);
void layernorm_backward_params_ref(const float* x, const float* dy, float* dgamma, float* dbeta,
                                   int64_t rows, int64_t cols, float eps);

}  // namespace tessel::kernels
