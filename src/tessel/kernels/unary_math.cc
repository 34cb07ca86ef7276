#include "tessel/kernels/unary_math.h"

#include <cmath>

#include "tessel/kernels/elementwise_map.h"
#include "tessel/kernels/fast_math.h"

namespace tessel::kernels {
namespace {

// exp(-x) is inf below x = -88.4: 1 / (1 + inf) is the right 0.
inline float sigmoid_one(float x) { return 1.0f / (1.0f + fast_exp(-x)); }

double sigmoid_ref_one(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

void sigmoid_forward(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return sigmoid_one(v); });
}

void sigmoid_forward_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(sigmoid_ref_one(x[i]));
}

void sigmoid_backward(const float* y, const float* dy, float* dx, int64_t n) {
  map2(y, dy, dx, n, [](float yv, float g) { return g * (yv * (1.0f - yv)); });
}

void sigmoid_backward_ref(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double yv = y[i];
    dx[i] = static_cast<float>(dy[i] * yv * (1.0 - yv));
  }
}

void silu_forward(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return v * sigmoid_one(v); });
}

void silu_forward_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i] * sigmoid_ref_one(x[i]));
}

void silu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  map2(x, dy, dx, n, [](float xv, float g) {
    const float s = sigmoid_one(xv);
    return g * (s * fmadd(xv, 1.0f - s, 1.0f));
  });
}

void silu_backward_ref(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double s = sigmoid_ref_one(x[i]);
    dx[i] = static_cast<float>(dy[i] * s * (1.0 + x[i] * (1.0 - s)));
  }
}

void sqrt_forward(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return fast_sqrt(v); });
}

void sqrt_forward_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::sqrt(static_cast<double>(x[i])));
}

void rsqrt_forward(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return 1.0f / fast_sqrt(v); });
}

void rsqrt_forward_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(x[i])));
}

}  // namespace tessel::kernels
