#include "tessel/kernels/dropout.h"

#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/partition.h"

namespace tessel::kernels {
namespace {

void check_p(float p) {
  if (!(p >= 0.0f && p <= 1.0f)) TS_THROW("dropout: probability ", p, " is outside [0, 1]");
}

}  // namespace

void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
             int64_t index_offset) {
  check_p(p);
  if (p == 0.0f) {
    if (x != y) std::copy(x, x + n, y);
    return;
  }
  const PhiloxStream stream(seed, key_hash);
  const float keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  // Philox dominates the cost (~10 rounds per element), so parallelise early.
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelGrain / 16)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, w = std::min(kBlock, n - begin);
    bool keep[kBlock];
    for (int64_t i = 0; i < w; ++i) {
      keep[i] = stream.uniform(static_cast<uint64_t>(index_offset + begin + i)) >= p;
    }
    // Dropped elements are exact zeros even where x is inf or NaN.
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) y[begin + i] = blend(keep[i], x[begin + i] * keep_scale, 0.0f);
  }
}

void dropout_ref(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
                 int64_t index_offset) {
  check_p(p);
  const PhiloxStream stream(seed, key_hash);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = stream.uniform(static_cast<uint64_t>(index_offset + i)) >= p;
    y[i] = keep ? static_cast<float>(static_cast<double>(x[i]) / (1.0 - p)) : 0.0f;
  }
}

}  // namespace tessel::kernels
