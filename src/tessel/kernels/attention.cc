#include "tessel/kernels/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/attention_gemm.h"
#include "tessel/kernels/dropout.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kB = kAttentionBlock;
using attention_gemm::kMr;
using attention_gemm::kNr;
constexpr int64_t kMaxPadded = kMaxAttentionHead;  // head dims padded to kNr stay within it
static_assert(kMaxAttentionHead % kNr == 0 && kB % kNr == 0 && kB % kMr == 0);

using RowBase = AttentionLayout::RowBase;

inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// A block product (attention_gemm.h): on bf16 dot products for a bf16
// program where the CPU has them (its operands are rounded to bf16 first).
template <bool kAccumulate, bool kTransA = false>
void product(bool bf16, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
             const float* b, int64_t ldb, float* c, int64_t ldc, attention_gemm::Band band = {}) {
  if (bf16)
    attention_gemm::block_gemm_bf16<kAccumulate, kTransA>(m, n, k, a, lda, b, ldb, c, ldc, band);
  else
    attention_gemm::block_gemm<kAccumulate, kTransA>(m, n, k, a, lda, b, ldb, c, ldc, band);
}

// The causal band of the block pair (query block q0, key block k0): query
// q0 + i sees key k0 + j only for j <= i + diagonal (attention_gemm.h).
inline attention_gemm::Band causal_band(const AttentionLayout& a, int64_t q0, int64_t k0) {
  return a.causal ? attention_gemm::Band{q0 + a.causal_shift - k0} : attention_gemm::Band{};
}

// x[0, n) rounded to bf16 in place (the operands of a bf16 program's products).
void round_block(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = bf16_bits_to_f32(f32_to_bf16_bits(x[i]));
}

inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_bits_to_f32(x); }

// Rows [row0, row0 + rows) of x into dst (kB x dp, row-major), rounded to
// bf16 if asked; padding rows and columns are 0.
template <typename T>
void gather_rows(const T* x, int64_t seq_stride, int64_t head_stride, int64_t row0, int64_t rows,
                 int64_t d, int64_t dp, bool bf16, float* dst) {
  for (int64_t i = 0; i < kB; ++i) {
    float* out = dst + i * dp;
    if (i >= rows) {
      std::fill(out, out + dp, 0.0f);
      continue;
    }
    const T* src = x + (row0 + i) * seq_stride;
    if (head_stride == 1) {
#pragma omp simd
      for (int64_t c = 0; c < d; ++c) out[c] = widen(src[c]);
    } else {
      for (int64_t c = 0; c < d; ++c) out[c] = widen(src[c * head_stride]);
    }
    std::fill(out + d, out + dp, 0.0f);
  }
  if (bf16 && sizeof(T) == sizeof(float)) round_block(dst, rows * dp);
}

// The same rows transposed: dst (dp x kB), dst[c * kB + i].
template <typename T>
void gather_cols(const T* x, int64_t seq_stride, int64_t head_stride, int64_t row0, int64_t rows,
                 int64_t d, int64_t dp, bool bf16, float* dst) {
  for (int64_t c = 0; c < d; ++c) {  // one output row at a time: whole vector stores
    const T* src = x + row0 * seq_stride + c * head_stride;
    float* out = dst + c * kB;
#pragma omp simd
    for (int64_t i = 0; i < rows; ++i) out[i] = widen(src[i * seq_stride]);
    std::fill(out + rows, out + kB, 0.0f);
  }
  std::fill(dst + d * kB, dst + dp * kB, 0.0f);
  if (bf16 && sizeof(T) == sizeof(float)) round_block(dst, dp * kB);
}

// The gathers over an input as stored (f32, or bf16: already rounded).
void gather_rows(AttentionInput x, int64_t offset, int64_t seq_stride, int64_t head_stride,
                 int64_t row0, int64_t rows, int64_t d, int64_t dp, bool bf16, float* dst) {
  auto gather = [&](const auto* typed) {
    gather_rows(typed + offset, seq_stride, head_stride, row0, rows, d, dp, bf16, dst);
  };
  x.bf16 ? gather(static_cast<const uint16_t*>(x.data)) : gather(static_cast<const float*>(x.data));
}
void gather_cols(AttentionInput x, int64_t offset, int64_t seq_stride, int64_t head_stride,
                 int64_t row0, int64_t rows, int64_t d, int64_t dp, bool bf16, float* dst) {
  auto gather = [&](const auto* typed) {
    gather_cols(typed + offset, seq_stride, head_stride, row0, rows, d, dp, bf16, dst);
  };
  x.bf16 ? gather(static_cast<const uint16_t*>(x.data)) : gather(static_cast<const float*>(x.data));
}

// x[row0 + j] (+)= block row j, for rows j < rows: `add` accumulates.
void scatter_rows(const float* block, int64_t dp, int64_t rows, int64_t d, float* x,
                  int64_t seq_stride, int64_t head_stride, int64_t row0, bool add) {
  for (int64_t j = 0; j < rows; ++j) {
    const float* src = block + j * dp;
    float* dst = x + (row0 + j) * seq_stride;
    if (head_stride == 1) {
      if (add) {
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) dst[c] += src[c];
      } else {
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) dst[c] = src[c];
      }
    } else {
      for (int64_t c = 0; c < d; ++c)
        dst[c * head_stride] = (add ? dst[c * head_stride] : 0.0f) + src[c];
    }
  }
}

// Keys of block [k0, k0 + cols) that query q sees: all, or up to q (causal).
inline int64_t visible(const AttentionLayout& a, int64_t query, int64_t k0, int64_t cols) {
  if (!a.causal) return cols;
  return std::clamp<int64_t>(query + a.causal_shift - k0 + 1, 0, cols);
}

// x[0, n), the probabilities (or their gradients) of local query `query`
// against keys k0, k0 + 1, ..., times the dropout mask (AttentionDropout):
// kept entries by 1 / (1 - p), dropped ones 0; nothing without dropout.
// `mark` (the backward's probabilities, >= 0): its dropped entries negated,
// so the sign bit carries the mask to pair_grads, which then draws nothing.
void drop_row(const AttentionLayout& a, int64_t row_counter, int64_t query, int64_t k0, int64_t n,
              float* x, float* mark = nullptr) {
  const AttentionDropout& d = a.dropout;
  if (d.p == 0.0f) return;
  const DropoutMask mask(d.p, d.seed, d.key_hash, d.step);
  const float keep_scale = mask.keep_scale();
  const int64_t first = row_counter + (d.query0 + query) * d.query + (d.key0 + k0) * d.key;
  bool keep[kB];
  mask.keeps(first, d.key, n, keep);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] = blend(keep[j], x[j] * keep_scale, 0.0f);
  if (!mark) return;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) mark[j] = blend(keep[j], mark[j], -mark[j]);
}

// One query block of one row, over every key block it sees.
void forward_block(const AttentionLayout& a, const RowBase& base, int64_t q0, AttentionInput q,
                   AttentionInput k, AttentionInput v, float* out, float* lse) {
  const int64_t d = a.d, dp = round_up(d, kNr), rows = std::min(kB, a.sq - q0);
  const int64_t mp = round_up(rows, kMr);
  float qb[kB * kMaxPadded], kt[kMaxPadded * kB], vb[kB * kMaxPadded];
  float ob[kB * kMaxPadded], s[kB * kB], m[kB], l[kB];
  gather_rows(q, base.q, a.q_seq, a.q_head, q0, rows, d, dp, a.bf16, qb);
  std::fill(ob, ob + kB * dp, 0.0f);
  std::fill(m, m + kB, -std::numeric_limits<float>::infinity());
  std::fill(l, l + kB, 0.0f);
  const int64_t key_end = a.causal ? std::min(a.sk, q0 + rows + a.causal_shift) : a.sk;
  for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
    const int64_t cols = std::min(kB, a.sk - k0);
    gather_cols(k, base.k, a.k_seq, a.k_head, k0, cols, d, dp, a.bf16, kt);
    gather_rows(v, base.k, a.k_seq, a.k_head, k0, cols, d, dp, a.bf16, vb);
    product<false>(a.bf16, mp, kB, dp, qb, dp, kt, kB, s, kB);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t n = visible(a, q0 + i, k0, cols);
      float* si = s + i * kB;
      const float block_max =
          n == 0 ? -std::numeric_limits<float>::infinity() : row_scaled_max(si, a.scale, n);
      const float m_new = std::max(m[i], block_max);
      const float alpha = n == 0 ? 1.0f : fast_exp(m[i] - m_new);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        si[j] = fast_exp(a.scale * si[j] - m_new);
        sum += si[j];
      }
      drop_row(a, base.drop, q0 + i, k0, n, si);  // l sums the probabilities before dropout
      if (a.bf16) round_block(si, n);
      std::fill(si + n, si + kB, 0.0f);
      l[i] = l[i] * alpha + sum;
      m[i] = m_new;
      float* oi = ob + i * dp;
#pragma omp simd
      for (int64_t c = 0; c < dp; ++c) oi[c] *= alpha;
    }
    product<true>(a.bf16, mp, dp, kB, s, kB, vb, dp, ob, dp, causal_band(a, q0, k0));
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float inv = 1.0f / l[i];
    float* oi = ob + i * dp;
    for (int64_t c = 0; c < d; ++c) oi[c] *= inv;
    lse[base.lse + (q0 + i) * a.lse_seq] = m[i] + std::log(l[i]);
  }
  scatter_rows(ob, dp, rows, d, out + base.q, a.q_seq, a.q_head, q0, false);
}

void check(const AttentionLayout& a) {
  TS_CHECK(a.d >= 1 && a.d <= kMaxAttentionHead, "attention: head dim ", a.d, " outside [1, ",
           kMaxAttentionHead, "]");
  TS_CHECK(!a.causal || a.sq == a.sk, "attention: causal with ", a.sq, " queries and ", a.sk,
           " keys");
  TS_CHECK(!a.causal || a.causal_shift >= 0, "attention: causal with the key chunk ",
           -a.causal_shift, " positions after the query chunk (every key masked)");
}

// What the backward keeps while one key block meets the query blocks.
struct BackwardBlocks {
  float qb[kB * kMaxPadded], dob[kB * kMaxPadded];  // q, dout rows
  float kb[kB * kMaxPadded];                        // k rows
  float kt[kMaxPadded * kB], vt[kMaxPadded * kB];   // k, v transposed
  float dqb[kB * kMaxPadded];                       // the pair's share of dq
  float dk[kB * kMaxPadded], dv[kB * kMaxPadded];   // the key block's sums
  float p[kB * kB], dp[kB * kB];
  float lse[kB];
};

// The key block's k and v, transposed, and k's rows (for dq).
void load_keys(const AttentionLayout& a, const RowBase& base, int64_t k0, int64_t cols,
               AttentionInput k, AttentionInput v, float* kt, float* vt, float* kb) {
  const int64_t dp = round_up(a.d, kNr);
  gather_cols(k, base.k, a.k_seq, a.k_head, k0, cols, a.d, dp, a.bf16, kt);
  gather_cols(v, base.k, a.k_seq, a.k_head, k0, cols, a.d, dp, a.bf16, vt);
  gather_rows(k, base.k, a.k_seq, a.k_head, k0, cols, a.d, dp, a.bf16, kb);
}

// p (recomputed probabilities, masked and padding entries 0) and dp =
// dout . v^T for the loaded query block q0 (qb, dob, lse; `rows` rows) against
// key block k0 (kt, vt: its k and v transposed; `cols` keys). With dropout,
// dp is the probabilities' gradient, dout . v^T times the mask (the row's
// counter `drop`), and p stays undropped but for its sign, negative where
// dropped (drop_row's mark); rowsum(p * dp) is still delta.
void probabilities(const AttentionLayout& a, int64_t q0, int64_t rows, int64_t k0, int64_t cols,
                   const float* qb, const float* dob, const float* lse, const float* kt,
                   const float* vt, float* p, float* dp, int64_t drop) {
  const int64_t d = round_up(a.d, kNr), mp = round_up(rows, kMr);
  product<false>(a.bf16, mp, kB, d, qb, d, kt, kB, p, kB);
  product<false>(a.bf16, mp, kB, d, dob, d, vt, kB, dp, kB);
  for (int64_t i = 0; i < mp; ++i) {
    const int64_t n = i < rows ? visible(a, q0 + i, k0, cols) : 0;
    float* pi = p + i * kB;
    const float shift = i < rows ? lse[i] : 0.0f;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) pi[j] = fast_exp(a.scale * pi[j] - shift);
    std::fill(pi + n, pi + kB, 0.0f);
    drop_row(a, drop, q0 + i, k0, n, dp + i * kB, pi);
  }
}

// Query block q0's q, dout (rows) and log-sum-exp into w.
void load_queries(const AttentionLayout& a, const RowBase& base, int64_t q0, int64_t rows,
                  AttentionInput q, const float* lse, AttentionInput dout, BackwardBlocks& w) {
  const int64_t dp = round_up(a.d, kNr);
  gather_rows(q, base.q, a.q_seq, a.q_head, q0, rows, a.d, dp, a.bf16, w.qb);
  gather_rows(dout, base.q, a.q_seq, a.q_head, q0, rows, a.d, dp, a.bf16, w.dob);
  for (int64_t i = 0; i < rows; ++i) w.lse[i] = lse[base.lse + (q0 + i) * a.lse_seq];
}

// delta[i] += rowsum(p * dp) for the block's rows, summed in one fixed order.
void add_delta(const float* p, const float* dp, int64_t rows, float* delta) {
  for (int64_t i = 0; i < rows; ++i) {
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < kB; ++j) sum += p[i * kB + j] * dp[i * kB + j];
    delta[i] += sum;
  }
}

// One (query block, key block) pair's gradients given the rows' complete
// delta: dp becomes ds = scale * |p| * (dp - delta), then p is dropped
// out by its sign (probabilities(); p and ds rounded to bf16 for a bf16
// program), then dv += p^T dout, dk += ds^T q (the key block's sums) and
// dqb = ds k (the pair's share of dq), their inner sums within the pair's
// causal band.
void pair_grads(const AttentionLayout& a, attention_gemm::Band band, int64_t rows,
                const float* delta, float* p, float* dp, const float* qb, const float* dob,
                const float* kb, float* dk, float* dv, float* dqb) {
  const int64_t d = round_up(a.d, kNr), mp = round_up(rows, kMr);
  const bool drop = a.dropout.p > 0.0f;
  const float keep_scale = DropoutMask::keep_scale_of(a.dropout.p);
  for (int64_t i = 0; i < mp; ++i) {
    const float di = i < rows ? delta[i] : 0.0f;
    float* pi = p + i * kB;
    float* dsi = dp + i * kB;
#pragma omp simd
    for (int64_t j = 0; j < kB; ++j) dsi[j] = a.scale * std::fabs(pi[j]) * (dsi[j] - di);
    if (!drop) continue;
#pragma omp simd
    for (int64_t j = 0; j < kB; ++j) pi[j] = blend(!std::signbit(pi[j]), pi[j] * keep_scale, 0.0f);
  }
  if (a.bf16) {
    round_block(p, mp * kB);
    round_block(dp, mp * kB);
  }
  product<true, true>(a.bf16, kB, d, mp, p, kB, dob, d, dv, d, band);  // p^T dout
  product<true, true>(a.bf16, kB, d, mp, dp, kB, qb, d, dk, d, band);  // ds^T q
  product<false>(a.bf16, mp, d, kB, dp, kB, kb, d, dqb, d, band);      // ds k
}

// The first query block that sees key block k0 (earlier ones see none of it).
inline int64_t first_query(const AttentionLayout& a, int64_t k0) {
  return a.causal ? std::max<int64_t>(0, k0 - a.causal_shift) / kB * kB : 0;
}

// The row's dq set to 0 (before the key blocks add to it).
void clear_dq(const AttentionLayout& a, const RowBase& base, float* dq) {
  for (int64_t i = 0; i < a.sq; ++i) {
    float* dst = dq + base.q + i * a.q_seq;
    for (int64_t c = 0; c < a.d; ++c) dst[c * a.q_head] = 0.0f;
  }
}

// A row's gradients given its complete delta, key block by key block: per
// query block that sees it, p and dp recomputed, ds = scale * p * (dp -
// delta), dv += p^T dout and dk += ds^T q (in the key block, over query
// blocks in order), dq += ds k (into the row's dq, over key blocks in
// order).
void backward_grads(const AttentionLayout& a, const RowBase& base, AttentionInput q,
                    AttentionInput k, AttentionInput v, const float* lse, AttentionInput dout,
                    const float* delta, float* dq, float* dk, float* dv, BackwardBlocks& w) {
  const int64_t d = a.d, dp = round_up(d, kNr);
  if (!a.accumulate) clear_dq(a, base, dq);
  for (int64_t k0 = 0; k0 < a.sk; k0 += kB) {
    const int64_t cols = std::min(kB, a.sk - k0);
    load_keys(a, base, k0, cols, k, v, w.kt, w.vt, w.kb);
    std::fill(w.dk, w.dk + kB * dp, 0.0f);
    std::fill(w.dv, w.dv + kB * dp, 0.0f);
    for (int64_t q0 = first_query(a, k0); q0 < a.sq; q0 += kB) {
      const int64_t rows = std::min(kB, a.sq - q0);
      load_queries(a, base, q0, rows, q, lse, dout, w);
      probabilities(a, q0, rows, k0, cols, w.qb, w.dob, w.lse, w.kt, w.vt, w.p, w.dp, base.drop);
      pair_grads(a, causal_band(a, q0, k0), rows, delta + q0, w.p, w.dp, w.qb, w.dob, w.kb, w.dk,
                 w.dv, w.dqb);
      scatter_rows(w.dqb, dp, rows, d, dq + base.q, a.q_seq, a.q_head, q0, true);
    }
    scatter_rows(w.dk, dp, cols, d, dk + base.k, a.k_seq, a.k_head, k0, a.accumulate);
    scatter_rows(w.dv, dp, cols, d, dv + base.k, a.k_seq, a.k_head, k0, a.accumulate);
  }
}

// The one-pass backward's working memory for a row (one thread's block of
// the scratch, reused for each row it runs): the row's keys gathered once,
// one query block's p and dp against every key block, and the row's dk and
// dv sums. (2 * kB + 5 * dp) * sk' floats (sk' the keys rounded up to kB),
// about 2.5 MiB at 2048 keys of head dim 64.
struct RowBackward {
  float *kt, *vt, *kb;  // per key block: its k, v transposed, its k rows
  float *p, *dp;        // per key block: kB x kB
  float *dk, *dv;       // per key block: kB x dp
  int64_t padded;       // floats in each of kt, vt, kb, dk, dv

  static int64_t floats(const AttentionLayout& a) {
    const int64_t keys = round_up(a.sk, kB);
    return 5 * keys * round_up(a.d, kNr) + 2 * keys * kB;
  }
  RowBackward(const AttentionLayout& a, float* block) {
    const int64_t keys = round_up(a.sk, kB);
    padded = keys * round_up(a.d, kNr);
    float** views[] = {&kt, &vt, &kb, &dk, &dv};
    for (float** x : views) *x = block, block += padded;
    p = block;
    dp = p + keys * kB;
  }
};

// The delta part of the backward's scratch, rounded up to whole cache lines
// so each thread's block starts on one.
int64_t delta_floats(const AttentionLayout& a) { return round_up(a.rows() * a.sq, 16); }

// The working blocks for `threads`: one per thread that can have a row.
int64_t working_blocks(const AttentionLayout& a, int threads) {
  return std::clamp<int64_t>(a.rows(), 1, std::max(threads, 1));
}

// A row's backward in one pass over its query blocks: per query block, p and
// dp against every key block it sees (two products each), delta summed from
// them, then per key block the three gradient products. The same sums in the
// same order as backward_grads given that delta (each element of delta and
// dq over key blocks in order, of dk and dv over query blocks in order), so
// dq, dk and dv are bitwise its, with p and dp computed once per pair rather
// than twice. `delta` is the row's scratch (sq floats); not accumulating.
void backward_row(const AttentionLayout& a, const RowBase& base, AttentionInput q, AttentionInput k,
                  AttentionInput v, const float* lse, AttentionInput dout, float* delta, float* dq,
                  float* dk, float* dv, BackwardBlocks& w, RowBackward& r) {
  const int64_t d = a.d, dp = round_up(d, kNr), tile = dp * kB;
  for (int64_t k0 = 0; k0 < a.sk; k0 += kB) {
    const int64_t at = k0 / kB * tile;
    load_keys(a, base, k0, std::min(kB, a.sk - k0), k, v, r.kt + at, r.vt + at, r.kb + at);
  }
  std::fill(r.dk, r.dk + r.padded, 0.0f);
  std::fill(r.dv, r.dv + r.padded, 0.0f);
  std::fill(delta, delta + a.sq, 0.0f);
  clear_dq(a, base, dq);
  for (int64_t q0 = 0; q0 < a.sq; q0 += kB) {
    const int64_t rows = std::min(kB, a.sq - q0);
    // The key blocks this query block sees (first_query's pairs).
    const int64_t key_end = a.causal ? std::min(a.sk, q0 + kB + a.causal_shift) : a.sk;
    load_queries(a, base, q0, rows, q, lse, dout, w);
    for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
      const int64_t b = k0 / kB;
      float *p = r.p + b * kB * kB, *dp_b = r.dp + b * kB * kB;
      probabilities(a, q0, rows, k0, std::min(kB, a.sk - k0), w.qb, w.dob, w.lse, r.kt + b * tile,
                    r.vt + b * tile, p, dp_b, base.drop);
      add_delta(p, dp_b, rows, delta + q0);
    }
    for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
      const int64_t b = k0 / kB;
      pair_grads(a, causal_band(a, q0, k0), rows, delta + q0, r.p + b * kB * kB, r.dp + b * kB * kB,
                 w.qb, w.dob, r.kb + b * tile, r.dk + b * tile, r.dv + b * tile, w.dqb);
      scatter_rows(w.dqb, dp, rows, d, dq + base.q, a.q_seq, a.q_head, q0, true);
    }
  }
  for (int64_t k0 = 0; k0 < a.sk; k0 += kB) {
    const int64_t cols = std::min(kB, a.sk - k0), at = k0 / kB * tile;
    scatter_rows(r.dk + at, dp, cols, d, dk + base.k, a.k_seq, a.k_head, k0, false);
    scatter_rows(r.dv + at, dp, cols, d, dv + base.k, a.k_seq, a.k_head, k0, false);
  }
}

}  // namespace

int64_t AttentionLayout::rows() const {
  int64_t n = 1;
  for (int i = 0; i < row_rank; ++i) n *= row_size[i];
  return n;
}

AttentionLayout::RowBase AttentionLayout::row_base(int64_t r) const {
  RowBase base;
  base.drop = dropout.base;
  for (int i = row_rank - 1; i >= 0; --i) {
    const int64_t idx = r % row_size[i];
    r /= row_size[i];
    base.q += idx * q_row[i];
    base.k += idx * k_row[i];
    base.lse += idx * lse_row[i];
    base.drop += idx * dropout.row[i];
  }
  return base;
}

void attention_forward(const AttentionLayout& a, AttentionInput q, AttentionInput k,
                       AttentionInput v, float* out, float* lse) {
  check(a);
  const int64_t blocks = (a.sq + kB - 1) / kB, tasks = a.rows() * blocks;
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
  for (int64_t t = 0; t < tasks; ++t)
    forward_block(a, a.row_base(t / blocks), t % blocks * kB, q, k, v, out, lse);
}

int64_t attention_backward_scratch_floats(const AttentionLayout& a, int threads) {
  return delta_floats(a) + working_blocks(a, threads) * RowBackward::floats(a);
}

void attention_backward(const AttentionLayout& a, AttentionInput q, AttentionInput k,
                        AttentionInput v, const float* lse, AttentionInput dout, float* dq,
                        float* dk, float* dv, float* scratch, int threads) {
  check(a);
  TS_CHECK(!a.accumulate,
           "attention_backward writes its gradients (accumulate is for ring "
           "attention's key chunks)");
  TS_CHECK(threads >= 1, "attention_backward: scratch for ", threads, " threads");
  const int64_t rows = a.rows();
  // At most the threads the scratch has blocks for (the count may have been
  // raised since it was planned); results do not depend on the count.
  const int team =
      static_cast<int>(std::min<int64_t>(working_blocks(a, threads), omp_get_max_threads()));
#pragma omp parallel num_threads(team) if (rows > 1)
  {
    RowBackward row(a, scratch + delta_floats(a) + omp_get_thread_num() * RowBackward::floats(a));
#pragma omp for schedule(dynamic, 1)
    for (int64_t r = 0; r < rows; ++r) {
      BackwardBlocks w;  // about 290 KB at the largest head dim
      backward_row(a, a.row_base(r), q, k, v, lse, dout, scratch + r * a.sq, dq, dk, dv, w, row);
    }
  }
}

void attention_output_delta(const AttentionLayout& a, AttentionInput dout, const float* out,
                            float* delta) {
  check(a);
  const int64_t rows = a.rows(), dp = round_up(a.d, kNr);
#pragma omp parallel for schedule(static) if (rows * a.sq * a.d > kAttentionBlock * kAttentionBlock)
  for (int64_t r = 0; r < rows; ++r) {
    const RowBase base = a.row_base(r);
    float db[kB * kMaxPadded], ob[kB * kMaxPadded];
    for (int64_t q0 = 0; q0 < a.sq; q0 += kB) {
      const int64_t n = std::min(kB, a.sq - q0);
      gather_rows(dout, base.q, a.q_seq, a.q_head, q0, n, a.d, dp, a.bf16, db);
      gather_rows({out, false}, base.q, a.q_seq, a.q_head, q0, n, a.d, dp, false, ob);
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < dp; ++c) sum += db[i * dp + c] * ob[i * dp + c];
        delta[r * a.sq + q0 + i] = sum;
      }
    }
  }
}

void attention_backward_grads(const AttentionLayout& a, AttentionInput q, AttentionInput k,
                              AttentionInput v, const float* lse, AttentionInput dout,
                              const float* delta, float* dq, float* dk, float* dv) {
  check(a);
  const int64_t rows = a.rows();
#pragma omp parallel for schedule(dynamic, 1) if (rows > 1)
  for (int64_t r = 0; r < rows; ++r) {
    BackwardBlocks w;
    backward_grads(a, a.row_base(r), q, k, v, lse, dout, delta + r * a.sq, dq, dk, dv, w);
  }
}

}  // namespace tessel::kernels
