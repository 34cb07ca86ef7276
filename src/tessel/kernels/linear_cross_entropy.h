// Fused linear + softmax cross-entropy (an LM head and its loss), after Cut
// Cross-Entropy: logits = h . w^T (rows x vocab) are computed tile by tile
// (a chunk of rows by a block of the vocab) into scratch, never all at once.
// The forward keeps per-row statistics, merged across a row's tiles as an
// online softmax does; the backward recomputes each tile's logits, turns
// them into the gradient in place (the CE kernel's row helpers) and
// multiplies it out: dh of the row chunk summed over the vocab blocks, dw of
// the vocab block over the row chunks. w may be one rank's slice of the
// output embedding; the caller combines the slices' statistics into the row
// logsumexp and checks labels against the global vocab.
// Tiles: kLinearCeTileBytes of f32 logits, as square as the shape allows
// (at most kLinearCeTileRows rows), so the sums the tiling adds (dh once per
// vocab block, dw once per row chunk) stay a few passes over each.
// Invariants: the tiling is a function of (rows, vocab) alone, and each
// product runs as fixed blocks (vocab rows for the logits and dw, dim
// columns for dh), one single-threaded sgemm each: results are bitwise the
// same for any OMP_NUM_THREADS. Scratch is one tile (with bf16 also the
// rounded w and h chunk); nothing of size rows x vocab is ever allocated.
// rows, vocab, dim <= 0, a negative offset or label throw tessel::Error first.
// bf16: every product's operands (w, each h chunk, each gradient tile) are
// rounded to bf16 and held in f32, so sgemm gives a bf16 matmul with f32
// accumulation (bf16 x bf16 is exact in f32); logits and statistics stay f32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessel::kernels {

// h (rows x dim) against w (vocab x dim), row-major; w holds global vocab rows
// [vocab_offset, vocab_offset + vocab), and a label outside them has no target here.
struct LinearCeShape {
  int64_t rows = 0, vocab = 0, dim = 0;
  int64_t vocab_offset = 0;
  bool vocab_major = true;  // w and dw vocab x dim (the GPT's); else dim x vocab (the Llama's)
};

// The most bytes of f32 logits one tile holds, and its most rows.
inline constexpr size_t kLinearCeTileBytes = size_t{16} << 20;
inline constexpr int64_t kLinearCeTileRows = 2048;

// A tile: all rows of h or kLinearCeTileRows of them, by the vocab columns
// that fit kLinearCeTileBytes beside them (a multiple of 512, or all).
struct LinearCeTile {
  int64_t rows = 0, vocab = 0;
};
LinearCeTile linear_ce_tile(int64_t rows, int64_t vocab);

// Bytes of scratch linear_ce_stats and linear_ce_backward need.
size_t linear_ce_scratch_bytes(const LinearCeShape& s, bool bf16);

// labels (rows, global ids) -> per row r over this slice: row_max[r] = max_v logit(r, v),
// row_sum[r] = sum_v exp(logit(r, v) - row_max[r]),
// row_target[r] = logit(r, labels[r] - vocab_offset) if that is in the slice, else 0.
void linear_ce_stats(const LinearCeShape& s, const float* h, const float* w, const int32_t* labels,
                     bool bf16, float* row_max, float* row_sum, float* row_target, void* scratch);

// With g(r, v) = scale * (exp(logit(r, v) - lse[r]) - [v == labels[r] - vocab_offset]):
//   dh (rows x dim)  = g . w     (written; summed over the vocab blocks in order)
//   dw (vocab x dim) = g^T . h   (written; summed over the row chunks in order)
void linear_ce_backward(const LinearCeShape& s, const float* h, const float* w,
                        const int32_t* labels, const float* lse, float scale, bool bf16, float* dh,
                        float* dw, void* scratch);

}  // namespace tessel::kernels
