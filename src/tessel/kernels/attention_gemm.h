// The block products of the fused attention kernels (kernels/attention.cc):
// small dense GEMMs on blocks that live on the stack, one thread each.
//
// Two kinds, chosen at run time by what the CPU has:
// - block_gemm: f32, register-tiled (kMr x kNr accumulators), the compiler's
//   vector code for the target (AVX-512 or AVX2 with FMA);
// - block_gemm_bf16: for a bf16 program, whose operands are already rounded
//   to bf16 (held in f32). On CPUs with AVX512-BF16 the products run on
//   vdpbf16ps (pairs of bf16 products added to f32 sums); elsewhere, or when
//   a test asks for it (set_attention_bf16_dot), on block_gemm.
// Invariants: every element of c sums over k in one fixed order that does
// not depend on where its tile starts (a causal Band leaves out only terms
// whose `a` entry is zero, the same ones every run), so results are bitwise
// the same run to run and for any thread count. vdpbf16ps adds each pair of products
// (odd index, then even) to the f32 sum with round-to-nearest-even and
// flushes denormals, so its sums differ from block_gemm's in the last bits.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tessel/kernels/fast_math.h"

namespace tessel::kernels::attention_gemm {

// The register tile: 16 vector registers' worth of accumulators with AVX-512
// (32 registers), 8 with AVX2 (16 registers).
#ifdef __AVX512F__
inline constexpr int64_t kMr = 8, kNr = 32;
#else
inline constexpr int64_t kMr = 4, kNr = 32;
#endif

// Where a causal block's nonzeros lie, for products whose `a` is one (the
// probabilities or the logits' gradient, queries by keys): entry (i, p) of
// a (as multiplied, m x k) can be nonzero only for p <= i + diagonal, or
// with kTransA (keys by queries) only for p >= i - diagonal. A row tile's
// inner sum skips the rest: adding those zeros would change no value
// (at most the sign of a zero sum). The default: no band.
struct Band {
  int64_t diagonal = int64_t{1} << 40;
};
// The inner range [lo, hi) of rows [i0, i0 + rows) under `band`.
template <bool kTransA>
inline void band_range(Band band, int64_t i0, int64_t rows, int64_t k, int64_t& lo, int64_t& hi) {
  lo = kTransA ? std::clamp<int64_t>(i0 - band.diagonal, 0, k) : 0;
  hi = kTransA ? k : std::clamp<int64_t>(i0 + rows + band.diagonal, 0, k);
}

// c (m x n, ldc) = [c +] a (m x k, lda) . b (k x n, ldb); m % kMr == 0,
// n % kNr == 0; with kTransA, a is stored transposed (k x m, lda).
template <bool kAccumulate, bool kTransA = false>
void block_gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                int64_t ldb, float* c, int64_t ldc, Band band = {}) {
  for (int64_t i0 = 0; i0 < m; i0 += kMr)
    for (int64_t j0 = 0; j0 < n; j0 += kNr) {
      int64_t lo, hi;
      band_range<kTransA>(band, i0, kMr, k, lo, hi);
      float acc[kMr][kNr];
      for (int64_t r = 0; r < kMr; ++r)
#pragma omp simd
        for (int64_t j = 0; j < kNr; ++j)
          acc[r][j] = kAccumulate ? c[(i0 + r) * ldc + j0 + j] : 0.0f;
      for (int64_t p = lo; p < hi; ++p) {
        const float* bp = b + p * ldb + j0;
        for (int64_t r = 0; r < kMr; ++r) {
          const float ar = kTransA ? a[p * lda + i0 + r] : a[(i0 + r) * lda + p];
#pragma omp simd
          for (int64_t j = 0; j < kNr; ++j) acc[r][j] = fmadd(ar, bp[j], acc[r][j]);
        }
      }
      for (int64_t r = 0; r < kMr; ++r)
#pragma omp simd
        for (int64_t j = 0; j < kNr; ++j) c[(i0 + r) * ldc + j0 + j] = acc[r][j];
    }
}

// Whether block_gemm_bf16 runs on bf16 dot products here: the CPU has
// AVX512-BF16 and no test has turned them off.
bool bf16_dot();
// Tests: false makes block_gemm_bf16 use block_gemm on this CPU too (true
// restores the CPU's choice). Not thread-safe; call between kernels.
void set_attention_bf16_dot(bool enabled);

// The largest m x k (or k x n) operand block_gemm_bf16 packs: the blocks'
// 64 x 128 (kAttentionBlock x kMaxAttentionHead).
inline constexpr int64_t kMaxPackedFloats = 64 * 128;

// block_gemm's product for operands that are bf16 values held in f32 (their
// low 16 bits zero), with m, n and k even as well.
template <bool kAccumulate, bool kTransA = false>
void block_gemm_bf16(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                     int64_t ldb, float* c, int64_t ldc, Band band = {});

}  // namespace tessel::kernels::attention_gemm
