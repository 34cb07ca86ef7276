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

// The step's low 32 bits are the Philox lane (a counter word); the high bits,
// zero in any real run, are folded into the key.
DropoutMask::DropoutMask(float p, uint64_t seed, uint64_t key_hash, uint64_t step)
    : stream_(seed, key_hash ^ ((step >> 32) * 0x9E3779B97F4A7C15ull)),
      lane_(static_cast<uint32_t>(step)),
      p_(p) {}

void DropoutMask::keeps(int64_t first, int64_t stride, int64_t n, bool* keep) const {
  float u[kMaxKeeps];
  stream_.uniforms(static_cast<uint64_t>(first), stride, n, lane_, u);
  for (int64_t i = 0; i < n; ++i) keep[i] = u[i] >= p_;
}

void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
             uint64_t step, int64_t index_offset, int64_t index_stride) {
  check_p(p);
  if (p == 0.0f) {
    if (x != y) std::copy(x, x + n, y);
    return;
  }
  const DropoutMask mask(p, seed, key_hash, step);
  const float keep_scale = mask.keep_scale();
  // Philox dominates the cost (~10 rounds per element), so parallelise early.
  constexpr int64_t kBlock = DropoutMask::kMaxKeeps;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n > kParallelGrain / 16)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, w = std::min(kBlock, n - begin);
    bool keep[kBlock];
    mask.keeps(index_offset + begin * index_stride, index_stride, w, keep);
    // Dropped elements are exact zeros even where x is inf or NaN.
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) y[begin + i] = blend(keep[i], x[begin + i] * keep_scale, 0.0f);
  }
}

void dropout_ref(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
                 uint64_t step, int64_t index_offset, int64_t index_stride) {
  check_p(p);
  const DropoutMask mask(p, seed, key_hash, step);
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = mask.keep(index_offset + i * index_stride);
    y[i] = keep ? static_cast<float>(static_cast<double>(x[i]) / (1.0 - p)) : 0.0f;
  }
}

}  // namespace tessel::kernels
