// Optimizer update kernels (AdamW, SGD) and the squared norm used for gradient
// clipping and overflow checks.
//
// Updates are fused single passes over flat parameter buffers, updating param
// (and the moment buffers) in place. grad_scale multiplies the raw gradient
// first (loss-scale undo and/or clipping factor). sum_of_squares reduces in
// fixed chunks with double accumulators, combined in chunk order: bitwise
// identical for any thread count.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// x (n) -> sum_i x[i]^2, in double. NaN/inf in x give NaN/inf.
double sum_of_squares(const float* x, int64_t n);
double sum_of_squares_ref(const float* x, int64_t n);

// param (n), grad (n), m (n), v (n) updated in place; step >= 1 counts from 1.
// As torch.optim.AdamW: g = grad * grad_scale; param *= 1 - lr * weight_decay;
// m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
// param -= lr * mhat / (sqrt(vhat) + eps), mhat = m / (1 - beta1^step),
// vhat = v / (1 - beta2^step).
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t step,
                  float grad_scale);
// The scalars of one update, computed once on the host (the CPU kernels and
// the CUDA backend's): the bias corrections 1 - beta^step in double, and
// lr / bc1, 1 / sqrt(bc2) and 1 - lr * weight_decay in f32. Throws when step < 1.
struct AdamWScalars {
  double bc1, bc2;
  float step_size, inv_sqrt_bc2, decay;
};
AdamWScalars adamw_scalars(float lr, float beta1, float beta2, float weight_decay, int64_t step);
void adamw_update_ref(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t step,
                      float grad_scale);

// param (n), grad (n) -> param -= lr * (grad * grad_scale + weight_decay * param)
// (coupled L2 weight decay, as torch.optim.SGD without momentum).
void sgd_update(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                float grad_scale);
void sgd_update_ref(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                    float grad_scale);

}  // namespace tessel::kernels
