#include "tessel/kernels/linear_cross_entropy.h"

#include <dnnl.h>

#include <algorithm>
#include <cmath>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/partition.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kVocabBlock = 512;  // logits and dw: vocab rows per sgemm
constexpr int64_t kDimBlock = 64;     // dh: dim columns per sgemm

void check_inputs(const char* op, const LinearCeShape& s, const int32_t* labels) {
  if (s.rows <= 0 || s.vocab <= 0 || s.dim <= 0 || s.vocab_offset < 0)
    TS_THROW(op, ": needs rows, vocab and dim > 0 and vocab_offset >= 0, got rows ", s.rows,
             ", vocab ", s.vocab, ", dim ", s.dim, ", vocab_offset ", s.vocab_offset);
  for (int64_t r = 0; r < s.rows; ++r)
    if (labels[r] < 0) TS_THROW(op, ": label ", labels[r], " at row ", r, " is negative");
}

// One product's free dim [0, n) in fixed blocks, sgemm_block(begin, size) (a
// dnnl_sgemm) for each, over the threads. oneDNN runs an sgemm called in a
// parallel region on one thread, so each sum's order is set by the shape alone
// (its own threading splits a long contracted dim, dh's vocab, from 8 threads
// on, and then the sums follow the thread count).
template <typename SgemmBlock>
void for_blocks(const char* product, int64_t n, int64_t block, SgemmBlock sgemm_block) {
  const int64_t blocks = (n + block - 1) / block;
  int64_t failed = 0;
#pragma omp parallel for schedule(static) reduction(+ : failed)
  for (int64_t b = 0; b < blocks; ++b)
    failed += sgemm_block(b * block, std::min(block, n - b * block)) != dnnl_success;
  if (failed > 0) TS_THROW("linear_cross_entropy: oneDNN sgemm failed computing ", product);
}

// Where a tile is: rows [r0, r0 + m) by vocab columns [v0, v0 + n); `first_*`
// marks the first tile of its row chunk and of its vocab block.
struct TileAt {
  int64_t r0, m, v0, n;
  bool first_of_rows, first_of_vocab;
};

// Checks the inputs; per tile (row chunks outer, vocab blocks inner), its
// logits h_c . w_b^T into scratch (m x n, leading dimension n), then
// tile_done(at, logits, w, h_c) with w and h_c as the products read them:
// with bf16 rounded into scratch (w once per call, h_c once per row chunk).
template <typename TileDone>
void for_each_tile(const char* op, const LinearCeShape& s, const float* h, const float* w,
                   const int32_t* labels, bool bf16, void* scratch, TileDone tile_done) {
  check_inputs(op, s, labels);
  const LinearCeTile tile = linear_ce_tile(s.rows, s.vocab);
  float* logits = static_cast<float*>(scratch);
  float* w_round = logits + tile.rows * tile.vocab;
  float* h_round = w_round + s.vocab * s.dim;
  if (bf16) round_bf16_in_f32(w, w_round, s.vocab * s.dim);
  const float* wu = bf16 ? w_round : w;
  for (int64_t r0 = 0; r0 < s.rows; r0 += tile.rows) {
    const int64_t m = std::min(tile.rows, s.rows - r0);
    if (bf16) round_bf16_in_f32(h + r0 * s.dim, h_round, m * s.dim);
    const float* hc = bf16 ? h_round : h + r0 * s.dim;
    for (int64_t v0 = 0; v0 < s.vocab; v0 += tile.vocab) {
      const int64_t n = std::min(tile.vocab, s.vocab - v0);
      for_blocks("the logits", n, kVocabBlock, [&](int64_t b0, int64_t nb) {
        const int64_t v = v0 + b0;
        return s.vocab_major ? dnnl_sgemm('N', 'T', m, nb, s.dim, 1.0f, hc, s.dim, wu + v * s.dim,
                                          s.dim, 0.0f, logits + b0, n)
                             : dnnl_sgemm('N', 'N', m, nb, s.dim, 1.0f, hc, s.dim, wu + v, s.vocab,
                                          0.0f, logits + b0, n);
      });
      tile_done(TileAt{r0, m, v0, n, v0 == 0, r0 == 0}, logits, wu, hc);
    }
  }
}

// The label's column in the tile at v0 of n columns, or -1 when it is elsewhere.
int64_t label_in(const LinearCeShape& s, int32_t label, int64_t v0, int64_t n) {
  const int64_t v = int64_t{label} - s.vocab_offset - v0;
  return v >= 0 && v < n ? v : -1;
}

// dh rows [r0, r0 + m) (+)= g . w_b and dw_b (+)= g^T . h_c for the tile `at`.
void tile_gradients(const LinearCeShape& s, const TileAt& at, const float* g, const float* wu,
                    const float* hc, float* dh, float* dw) {
  float* dh_c = dh + at.r0 * s.dim;
  const float dh_beta = at.first_of_rows ? 0.0f : 1.0f;
  for_blocks("dh", s.dim, kDimBlock, [&](int64_t d0, int64_t nd) {
    return s.vocab_major
               ? dnnl_sgemm('N', 'N', at.m, nd, at.n, 1.0f, g, at.n, wu + at.v0 * s.dim + d0, s.dim,
                            dh_beta, dh_c + d0, s.dim)
               : dnnl_sgemm('N', 'T', at.m, nd, at.n, 1.0f, g, at.n, wu + d0 * s.vocab + at.v0,
                            s.vocab, dh_beta, dh_c + d0, s.dim);
  });
  const float dw_beta = at.first_of_vocab ? 0.0f : 1.0f;
  for_blocks("dw", at.n, kVocabBlock, [&](int64_t b0, int64_t nb) {
    const int64_t v = at.v0 + b0;
    return s.vocab_major ? dnnl_sgemm('T', 'N', nb, s.dim, at.m, 1.0f, g + b0, at.n, hc, s.dim,
                                      dw_beta, dw + v * s.dim, s.dim)
                         : dnnl_sgemm('T', 'N', s.dim, nb, at.m, 1.0f, hc, s.dim, g + b0, at.n,
                                      dw_beta, dw + v, s.vocab);
  });
}

}  // namespace

LinearCeTile linear_ce_tile(int64_t rows, int64_t vocab) {
  const int64_t tile_rows = std::min(rows, kLinearCeTileRows);
  const int64_t fit = int64_t{kLinearCeTileBytes / sizeof(float)} / std::max<int64_t>(tile_rows, 1);
  const int64_t columns = std::max(kVocabBlock, fit / kVocabBlock * kVocabBlock);
  return {tile_rows, std::min(vocab, columns)};
}

size_t linear_ce_scratch_bytes(const LinearCeShape& s, bool bf16) {
  const LinearCeTile tile = linear_ce_tile(s.rows, s.vocab);
  return sizeof(float) * (tile.rows * tile.vocab + (bf16 ? (s.vocab + tile.rows) * s.dim : 0));
}

void linear_ce_stats(const LinearCeShape& s, const float* h, const float* w, const int32_t* labels,
                     bool bf16, float* row_max_out, float* row_sum_out, float* row_target,
                     void* scratch) {
  // Each row's running max and sum, rescaled when a later tile raises the max.
  const auto row_stats = [&](const TileAt& at, float* logits, const float*, const float*) {
#pragma omp parallel for schedule(static) if (at.m * at.n > kParallelGrain)
    for (int64_t i = 0; i < at.m; ++i) {
      const int64_t r = at.r0 + i;
      const float* xr = logits + i * at.n;
      const float tile_max = row_max(xr, at.n);
      const float new_max = at.first_of_rows ? tile_max : std::max(row_max_out[r], tile_max);
      const float tile_sum = row_exp_sum(xr, 1.0f, new_max, at.n);
      row_sum_out[r] = at.first_of_rows
                           ? tile_sum
                           : row_sum_out[r] * std::exp(row_max_out[r] - new_max) + tile_sum;
      row_max_out[r] = new_max;
      const int64_t target = label_in(s, labels[r], at.v0, at.n);
      if (at.first_of_rows) row_target[r] = 0.0f;
      if (target >= 0) row_target[r] = xr[target];
    }
  };
  for_each_tile("linear_ce_stats", s, h, w, labels, bf16, scratch, row_stats);
}

void linear_ce_backward(const LinearCeShape& s, const float* h, const float* w,
                        const int32_t* labels, const float* lse, float scale, bool bf16, float* dh,
                        float* dw, void* scratch) {
  // Each tile's logits become its gradient g in place, then g . w and g^T . h.
  const auto gradients = [&](const TileAt& at, float* g, const float* wu, const float* hc) {
#pragma omp parallel for schedule(static) if (at.m * at.n > kParallelGrain)
    for (int64_t i = 0; i < at.m; ++i) {
      float* gr = g + i * at.n;
      row_exp_sum(gr, 1.0f, lse[at.r0 + i], gr, at.n);
#pragma omp simd
      for (int64_t v = 0; v < at.n; ++v) gr[v] *= scale;
      const int64_t target = label_in(s, labels[at.r0 + i], at.v0, at.n);
      if (target >= 0) gr[target] -= scale;
    }
    if (bf16) round_bf16_in_f32(g, g, at.m * at.n);
    tile_gradients(s, at, g, wu, hc, dh, dw);
  };
  for_each_tile("linear_ce_backward", s, h, w, labels, bf16, scratch, gradients);
}

}  // namespace tessel::kernels
