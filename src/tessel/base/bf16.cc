#include "tessel/base/bf16.h"

namespace tessel {
namespace {
// Below this many elements one thread does the whole copy.
constexpr int64_t kParallelMin = 1 << 15;
}  // namespace

void round_to_bf16(const float* in, uint16_t* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16_bits(in[i]);
}

void round_bf16_in_f32(const float* in, float* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_to_f32(f32_to_bf16_bits(in[i]));
}

void widen_bf16(const uint16_t* in, float* out, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_to_f32(in[i]);
}

}  // namespace tessel
