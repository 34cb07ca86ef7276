#include "tessel/kernels/rotary.h"

#include <cmath>

#include "tessel/kernels/partition.h"

namespace tessel::kernels {
namespace {

double angle(const RotaryView& v, int64_t position, int64_t pair) {
  return static_cast<double>(v.offset + position) *
         rotary_frequency(v.theta, pair, v.cols, v.scaling);
}

}  // namespace

void rotary(const float* x, float* y, const RotaryView& v, float* table) {
  const int64_t pairs = v.cols / 2;
  const float sign = v.inverse ? -1.0f : 1.0f;
  // table[p * cols + 2i] = cos, [.. + 2i + 1] = sin of position p, pair i.
#pragma omp parallel for schedule(static) if (v.positions * pairs > kParallelGrain / 16)
  for (int64_t p = 0; p < v.positions; ++p)
    for (int64_t i = 0; i < pairs; ++i) {
      const double a = angle(v, p, i);
      table[p * v.cols + 2 * i] = static_cast<float>(std::cos(a));
      table[p * v.cols + 2 * i + 1] = sign * static_cast<float>(std::sin(a));
    }
  const int64_t blocks = v.outer * v.positions, rows = v.inner / v.cols;
#pragma omp parallel for schedule(static) if (blocks * v.inner > kParallelGrain)
  for (int64_t b = 0; b < blocks; ++b) {
    const float* cs = table + (b % v.positions) * v.cols;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + (b * rows + r) * v.cols;
      float* yr = y + (b * rows + r) * v.cols;
#pragma omp simd
      for (int64_t i = 0; i < pairs; ++i) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = xr[2 * i], x1 = xr[2 * i + 1];
        yr[2 * i] = x0 * c - x1 * s;
        yr[2 * i + 1] = x0 * s + x1 * c;
      }
    }
  }
}

void rotary_ref(const float* x, float* y, const RotaryView& v) {
  const int64_t rows = v.inner / v.cols;
  for (int64_t b = 0; b < v.outer * v.positions; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < v.cols / 2; ++i) {
        const double a = (v.inverse ? -1.0 : 1.0) * angle(v, b % v.positions, i);
        const int64_t at = (b * rows + r) * v.cols + 2 * i;
        const double x0 = x[at], x1 = x[at + 1];
        y[at] = static_cast<float>(x0 * std::cos(a) - x1 * std::sin(a));
        y[at + 1] = static_cast<float>(x0 * std::sin(a) + x1 * std::cos(a));
      }
}

}  // namespace tessel::kernels
