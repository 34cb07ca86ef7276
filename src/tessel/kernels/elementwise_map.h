// The loops of the elementwise CPU kernels: y[i] = f(x[i]) and
// z[i] = f(x[i], y[i]), vectorised, split statically across threads above
// kParallelGrain elements. Each element depends only on its own inputs, so
// results do not depend on the thread count. Pass a lambda, not a function
// pointer, so that f inlines and the loop vectorises.
#pragma once

#include <cstdint>

#include "tessel/kernels/partition.h"

namespace tessel::kernels {

template <typename F>
void map1(const float* x, float* y, int64_t n, F f) {
#pragma omp parallel for simd schedule(simd : static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <typename F>
void map2(const float* x, const float* y, float* z, int64_t n, F f) {
#pragma omp parallel for simd schedule(simd : static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) z[i] = f(x[i], y[i]);
}

}  // namespace tessel::kernels
