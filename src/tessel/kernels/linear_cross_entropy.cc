#include "tessel/kernels/linear_cross_entropy.h"

#include <dnnl.h>

#include <algorithm>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/partition.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kVocabBlock = 512;  // logits and dw: vocab rows per sgemm
constexpr int64_t kDimBlock = 64;     // dh: dim columns per sgemm

void check_inputs(const char* op, const LinearCeShape& s, const int32_t* labels) {
  if (s.rows <= 0 || s.vocab <= 0 || s.dim <= 0 || s.vocab_offset < 0) {
    TS_THROW(op, ": needs rows, vocab and dim > 0 and vocab_offset >= 0, got rows ", s.rows,
             ", vocab ", s.vocab, ", dim ", s.dim, ", vocab_offset ", s.vocab_offset);
  }
  for (int64_t r = 0; r < s.rows; ++r) {
    if (labels[r] < 0) TS_THROW(op, ": label ", labels[r], " at row ", r, " is negative");
  }
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
  for (int64_t b = 0; b < blocks; ++b) {
    failed += sgemm_block(b * block, std::min(block, n - b * block)) != dnnl_success;
  }
  if (failed > 0) TS_THROW("linear_cross_entropy: oneDNN sgemm failed computing ", product);
}

// Checks the inputs; per chunk of rows [r0, r0 + m), its logits h_c . w^T into
// scratch (m x vocab), then chunk_done(r0, m, logits, w, h_c) with w and h_c as
// the products read them: with bf16 rounded into scratch (w once per call).
template <typename ChunkDone>
void for_each_chunk(const char* op, const LinearCeShape& s, const float* h, const float* w,
                    const int32_t* labels, bool bf16, void* scratch, ChunkDone chunk_done) {
  check_inputs(op, s, labels);
  const int64_t chunk = linear_ce_chunk_rows(s.vocab);
  float* logits = static_cast<float*>(scratch);
  float* w_round = logits + std::min(s.rows, chunk) * s.vocab;
  float* h_round = w_round + s.vocab * s.dim;
  if (bf16) round_bf16_in_f32(w, w_round, s.vocab * s.dim);
  const float* wu = bf16 ? w_round : w;
  for (int64_t r0 = 0; r0 < s.rows; r0 += chunk) {
    const int64_t m = std::min(chunk, s.rows - r0);
    if (bf16) round_bf16_in_f32(h + r0 * s.dim, h_round, m * s.dim);
    const float* hc = bf16 ? h_round : h + r0 * s.dim;
    for_blocks("the logits", s.vocab, kVocabBlock, [&](int64_t v0, int64_t nv) {
      return dnnl_sgemm('N', 'T', m, nv, s.dim, 1.0f, hc, s.dim, wu + v0 * s.dim, s.dim, 0.0f,
                        logits + v0, s.vocab);
    });
    chunk_done(r0, m, logits, wu, hc);
  }
}

// The label's column in this slice, or -1 when another slice holds it.
int64_t local_label(const LinearCeShape& s, int32_t label) {
  const int64_t v = int64_t{label} - s.vocab_offset;
  return v >= 0 && v < s.vocab ? v : -1;
}

}  // namespace

int64_t linear_ce_chunk_rows(int64_t vocab) {
  const int64_t fit = int64_t{kLinearCeChunkBytes / sizeof(float)} / std::max<int64_t>(vocab, 1);
  return std::max<int64_t>(8, fit / 8 * 8);
}

size_t linear_ce_scratch_bytes(const LinearCeShape& s, bool bf16) {
  const int64_t chunk = std::min(s.rows, linear_ce_chunk_rows(s.vocab));
  return sizeof(float) * (chunk * s.vocab + (bf16 ? (s.vocab + chunk) * s.dim : 0));
}

void linear_ce_stats(const LinearCeShape& s, const float* h, const float* w, const int32_t* labels,
                     bool bf16, float* row_max_out, float* row_sum_out, float* row_target,
                     void* scratch) {
  const auto row_stats = [&](int64_t r0, int64_t m, float* logits, const float*, const float*) {
#pragma omp parallel for schedule(static) if (m * s.vocab > kParallelGrain)
    for (int64_t i = 0; i < m; ++i) {
      const float* xr = logits + i * s.vocab;
      row_max_out[r0 + i] = row_max(xr, s.vocab);
      row_sum_out[r0 + i] = row_exp_sum(xr, 1.0f, row_max_out[r0 + i], s.vocab);
      const int64_t target = local_label(s, labels[r0 + i]);
      row_target[r0 + i] = target >= 0 ? xr[target] : 0.0f;
    }
  };
  for_each_chunk("linear_ce_stats", s, h, w, labels, bf16, scratch, row_stats);
}

void linear_ce_backward(const LinearCeShape& s, const float* h, const float* w,
                        const int32_t* labels, const float* lse, float scale, bool bf16, float* dh,
                        float* dw, void* scratch) {
  // Each chunk's logits become its gradient g in place, then g . w and g^T . h.
  const auto gradients = [&](int64_t r0, int64_t m, float* g, const float* wu, const float* hc) {
#pragma omp parallel for schedule(static) if (m * s.vocab > kParallelGrain)
    for (int64_t i = 0; i < m; ++i) {
      float* gr = g + i * s.vocab;
      row_exp_sum(gr, 1.0f, lse[r0 + i], gr, s.vocab);
#pragma omp simd
      for (int64_t v = 0; v < s.vocab; ++v) gr[v] *= scale;
      const int64_t target = local_label(s, labels[r0 + i]);
      if (target >= 0) gr[target] -= scale;
    }
    if (bf16) round_bf16_in_f32(g, g, m * s.vocab);
    for_blocks("dh", s.dim, kDimBlock, [&](int64_t d0, int64_t nd) {
      return dnnl_sgemm('N', 'N', m, nd, s.vocab, 1.0f, g, s.vocab, wu + d0, s.dim, 0.0f,
                        dh + r0 * s.dim + d0, s.dim);
    });
    for_blocks("dw", s.vocab, kVocabBlock, [&](int64_t v0, int64_t nv) {
      return dnnl_sgemm('T', 'N', nv, s.dim, m, 1.0f, g + v0, s.vocab, hc, s.dim,
                        r0 == 0 ? 0.0f : 1.0f, dw + v0 * s.dim, s.dim);
    });
  };
  for_each_chunk("linear_ce_backward", s, h, w, labels, bf16, scratch, gradients);
}

}  // namespace tessel::kernels
