#include "tessel/base/bf16.h"

#include <immintrin.h>

#include <algorithm>

namespace tessel {
namespace {
// Below this many elements one thread does the whole copy.
constexpr int64_t kParallelMin = 1 << 15;
// round_to_bf16 hands each thread whole blocks of this many elements.
constexpr int64_t kRoundBlock = 4096;

bool cpu_converts_bf16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

// f32_to_bf16_bits over n values with AVX512-BF16's vcvtne2ps2bf16, 32 a
// step. The instruction rounds to nearest even and quiets NaNs exactly as
// f32_to_bf16_bits does, but reads denormal inputs as zero: a step holding a
// denormal (never in training data, but the bits must not depend on the
// CPU) takes the scalar form instead.
// Whether any of v's 16 floats is denormal. A function with the target
// attribute, not a lambda: a lambda inside round_block_native does not
// inherit its target and fails to compile where -march lacks AVX-512.
__attribute__((target("avx512f"))) inline bool has_denormal(__m512 v) {
  const __m512i abs_bits = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff));
  // 1 <= |bits| <= 0x007fffff as one unsigned compare of |bits| - 1.
  return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(abs_bits, _mm512_set1_epi32(1)),
                                 _mm512_set1_epi32(0x007fffff)) != 0;
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) void round_block_native(const float* in,
                                                                               uint16_t* out,
                                                                               int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(in + i), hi = _mm512_loadu_ps(in + i + 16);
    if (has_denormal(lo) || has_denormal(hi)) {
      for (int64_t j = i; j < i + 32; ++j) out[j] = f32_to_bf16_bits(in[j]);
      continue;
    }
    _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  for (; i < n; ++i) out[i] = f32_to_bf16_bits(in[i]);
}
}  // namespace

void round_to_bf16(const float* in, uint16_t* out, int64_t n) {
  if (cpu_converts_bf16()) {
    const int64_t blocks = (n + kRoundBlock - 1) / kRoundBlock;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t start = b * kRoundBlock;
      round_block_native(in + start, out + start, std::min(kRoundBlock, n - start));
    }
    return;
  }
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
