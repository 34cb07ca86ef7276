#include "tessel/kernels/optimizer.h"

#include <cmath>

#include "tessel/base/error.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/partition.h"

namespace tessel::kernels {

double sum_of_squares(const float* x, int64_t n) {
  const int64_t chunks = num_chunks(n, kParallelGrain);
  double partial[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = chunk_begin(c, chunks, n), end = chunk_begin(c + 1, chunks, n);
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = begin; i < end; ++i) {
      const double d = x[i];
      acc += d * d;
    }
    partial[c] = acc;
  }
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

double sum_of_squares_ref(const float* x, int64_t n) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  return total;
}

AdamWScalars adamw_scalars(float lr, float beta1, float beta2, float weight_decay, int64_t step) {
  if (step < 1) TS_THROW("adamw_update: step ", step, " must be >= 1 (steps count from 1)");
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  return {bc1, bc2, static_cast<float>(lr / bc1), static_cast<float>(1.0 / std::sqrt(bc2)),
          1.0f - lr * weight_decay};
}

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int64_t step,
                  float grad_scale) {
  const AdamWScalars s = adamw_scalars(lr, beta1, beta2, weight_decay, step);
  const float step_size = s.step_size, inv_sqrt_bc2 = s.inv_sqrt_bc2, decay = s.decay;
  const float one_m_b1 = 1.0f - beta1, one_m_b2 = 1.0f - beta2;
#pragma omp parallel for simd schedule(simd : static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    const float mi = fmadd(beta1, m[i], one_m_b1 * g);
    const float vi = fmadd(beta2, v[i], one_m_b2 * g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = fmadd(fast_sqrt(vi), inv_sqrt_bc2, eps);
    param[i] = fmadd(param[i], decay, -(step_size * mi / denom));  // one rounding, as on CUDA
  }
}

void adamw_update_ref(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t step,
                      float grad_scale) {
  const AdamWScalars s = adamw_scalars(lr, beta1, beta2, weight_decay, step);
  const double bc1 = s.bc1, bc2 = s.bc2;
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(grad[i]) * grad_scale;
    const double mi = beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * g;
    const double vi = beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    double p = param[i];
    p *= 1.0 - static_cast<double>(lr) * weight_decay;
    p -= lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
    param[i] = static_cast<float>(p);
  }
}

void sgd_update(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                float grad_scale) {
#pragma omp parallel for simd schedule(simd : static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const float g = fmadd(grad[i], grad_scale, weight_decay * param[i]);
    param[i] = fmadd(-lr, g, param[i]);
  }
}

void sgd_update_ref(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                    float grad_scale) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(grad[i]) * grad_scale + weight_decay * param[i];
    param[i] = static_cast<float>(param[i] - lr * g);
  }
}

}  // namespace tessel::kernels
