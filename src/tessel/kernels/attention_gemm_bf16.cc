// block_gemm_bf16 (attention_gemm.h): bf16 pairs packed from the f32-held
// operands, multiplied with AVX512-BF16's vdpbf16ps where the CPU has it
// (checked once at run time; the function is compiled for that instruction
// set whatever -march says), else block_gemm.
#include <immintrin.h>

#include <atomic>
#include <cstring>

#include "tessel/kernels/attention_gemm.h"

namespace tessel::kernels::attention_gemm {
namespace {

std::atomic<bool>& dot_enabled() {
  static std::atomic<bool> enabled{__builtin_cpu_supports("avx512bf16") != 0};
  return enabled;
}

inline uint32_t bits(const float* x) {
  uint32_t u;
  std::memcpy(&u, x, 4);
  return u;
}

// out[p * n + j] = the bf16 pair (x[2p][j], x[2p + 1][j]) of x (k x n, ld):
// pairs along x's rows, as vdpbf16ps takes its second operand.
void pair_rows(const float* x, int64_t k, int64_t n, int64_t ld, uint32_t* out) {
  for (int64_t p = 0; p < k / 2; ++p) {
    const float* even = x + 2 * p * ld;
    const float* odd = even + ld;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j)
      out[p * n + j] = (bits(odd + j) & 0xffff0000u) | (bits(even + j) >> 16);
  }
}

// out[i * k / 2 + p] = the bf16 pair (x[i][2p], x[i][2p + 1]) of x (m x k, ld):
// pairs along x's columns.
void pair_cols(const float* x, int64_t m, int64_t k, int64_t ld, uint32_t* out) {
  for (int64_t i = 0; i < m; ++i) {
    const float* row = x + i * ld;
    uint32_t* dst = out + i * (k / 2);
#pragma omp simd
    for (int64_t p = 0; p < k / 2; ++p)
      dst[p] = (bits(row + 2 * p + 1) & 0xffff0000u) | (bits(row + 2 * p) >> 16);
  }
}

// c (m x n) = [c +] sum over pairs p of a's pair (i, p) . b's pair (p, j):
// a's pair (i, p) at a[i * a_row + p * a_pair], b (k2 x n) from pair_rows.
// Pairs outside `band` (attention_gemm.h; in elements of k = 2 * k2) skipped.
template <bool kAccumulate, bool kTransA>
__attribute__((target("avx512f,avx512bf16"))) void dot_tiles(int64_t m, int64_t n, int64_t k2,
                                                             const uint32_t* a, int64_t a_row,
                                                             int64_t a_pair, const uint32_t* b,
                                                             float* c, int64_t ldc, Band band) {
  constexpr int kRows = 8, kVecs = 2;  // 16 accumulators of 16 floats
  for (int64_t i0 = 0; i0 < m; i0 += kRows)
    for (int64_t j0 = 0; j0 < n; j0 += 16 * kVecs) {
      int64_t lo, hi;
      band_range<kTransA>(band, i0, kRows, 2 * k2, lo, hi);
      __m512 acc[kRows][kVecs];
      for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < kVecs; ++v)
          acc[r][v] =
              kAccumulate ? _mm512_loadu_ps(c + (i0 + r) * ldc + j0 + 16 * v) : _mm512_setzero_ps();
      for (int64_t p = lo / 2; p < (hi + 1) / 2; ++p) {
        __m512i bv[kVecs];
        for (int v = 0; v < kVecs; ++v) bv[v] = _mm512_loadu_si512(b + p * n + j0 + 16 * v);
        for (int r = 0; r < kRows; ++r) {
          const __m512i ar = _mm512_set1_epi32(static_cast<int>(a[(i0 + r) * a_row + p * a_pair]));
          for (int v = 0; v < kVecs; ++v)
            acc[r][v] = _mm512_dpbf16_ps(acc[r][v], reinterpret_cast<__m512bh>(ar),
                                         reinterpret_cast<__m512bh>(bv[v]));
        }
      }
      for (int r = 0; r < kRows; ++r)
        for (int v = 0; v < kVecs; ++v)
          _mm512_storeu_ps(c + (i0 + r) * ldc + j0 + 16 * v, acc[r][v]);
    }
}

}  // namespace

bool bf16_dot() { return dot_enabled().load(std::memory_order_relaxed); }

void set_attention_bf16_dot(bool enabled) {
  dot_enabled().store(enabled && __builtin_cpu_supports("avx512bf16") != 0,
                      std::memory_order_relaxed);
}

template <bool kAccumulate, bool kTransA>
void block_gemm_bf16(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float* c, int64_t ldc, Band band) {
  if (!bf16_dot() || m % 8 != 0 || n % 32 != 0 || k % 2 != 0 || m * k > kMaxPackedFloats ||
      k * n > kMaxPackedFloats)
    return block_gemm<kAccumulate, kTransA>(m, n, k, a, lda, b, ldb, c, ldc, band);
  alignas(64) uint32_t ap[kMaxPackedFloats / 2], bp[kMaxPackedFloats / 2];
  pair_rows(b, k, n, ldb, bp);
  if (kTransA) {
    pair_rows(a, k, m, lda, ap);  // pair (i, p) at ap[p * m + i]
    dot_tiles<kAccumulate, true>(m, n, k / 2, ap, 1, m, bp, c, ldc, band);
  } else {
    pair_cols(a, m, k, lda, ap);  // pair (i, p) at ap[i * k / 2 + p]
    dot_tiles<kAccumulate, false>(m, n, k / 2, ap, k / 2, 1, bp, c, ldc, band);
  }
}

template void block_gemm_bf16<false, false>(int64_t, int64_t, int64_t, const float*, int64_t,
                                            const float*, int64_t, float*, int64_t, Band);
template void block_gemm_bf16<true, false>(int64_t, int64_t, int64_t, const float*, int64_t,
                                           const float*, int64_t, float*, int64_t, Band);
template void block_gemm_bf16<true, true>(int64_t, int64_t, int64_t, const float*, int64_t,
                                          const float*, int64_t, float*, int64_t, Band);

}  // namespace tessel::kernels::attention_gemm
