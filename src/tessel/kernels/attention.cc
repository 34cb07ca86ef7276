#include "tessel/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/fast_math.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kB = kAttentionBlock;

// Element offsets of row r's first element in q, k and lse.
struct RowBase {
  int64_t q = 0, k = 0, lse = 0;
};

RowBase row_base(const AttentionLayout& a, int64_t r) {
  RowBase base;
  for (int i = a.row_rank - 1; i >= 0; --i) {
    const int64_t idx = r % a.row_size[i];
    r /= a.row_size[i];
    base.q += idx * a.q_row[i];
    base.k += idx * a.k_row[i];
    base.lse += idx * a.lse_row[i];
  }
  return base;
}

inline float operand(float x, bool bf16) {
  return bf16 ? bf16_bits_to_f32(f32_to_bf16_bits(x)) : x;
}

// rows x d block of x starting at `row0` into dst (row-major, d columns).
void gather_rows(const float* x, int64_t seq_stride, int64_t head_stride, int64_t row0,
                 int64_t rows, int64_t d, bool bf16, float* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = x + (row0 + i) * seq_stride;
    for (int64_t c = 0; c < d; ++c) dst[i * d + c] = operand(src[c * head_stride], bf16);
  }
}

// The same block transposed: dst[c * kB + i].
void gather_cols(const float* x, int64_t seq_stride, int64_t head_stride, int64_t row0,
                 int64_t rows, int64_t d, bool bf16, float* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* src = x + (row0 + i) * seq_stride;
    for (int64_t c = 0; c < d; ++c) dst[c * kB + i] = operand(src[c * head_stride], bf16);
  }
}

// s[i][j] = sum_c x[i][c] * yt[c][j]: (rows x d) times (d x cols), s row stride kB.
void block_product(const float* x, const float* yt, int64_t rows, int64_t cols, int64_t d,
                   float* s) {
  for (int64_t i = 0; i < rows; ++i) {
    float* si = s + i * kB;
    std::fill(si, si + cols, 0.0f);
    for (int64_t c = 0; c < d; ++c) {
      const float xc = x[i * d + c];
      const float* yc = yt + c * kB;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) si[j] = fmadd(xc, yc[j], si[j]);
    }
  }
}

// Keys of block [k0, k0 + cols) that query q sees: all, or up to q (causal).
inline int64_t visible(const AttentionLayout& a, int64_t query, int64_t k0, int64_t cols) {
  if (!a.causal) return cols;
  return std::clamp<int64_t>(query - k0 + 1, 0, cols);
}

// One query block of one row, over every key block it sees.
void forward_block(const AttentionLayout& a, const RowBase& base, int64_t q0, const float* q,
                   const float* k, const float* v, float* out, float* lse) {
  const int64_t d = a.d, rows = std::min(kB, a.sq - q0);
  float qb[kB * kMaxAttentionHead], kt[kMaxAttentionHead * kB], vb[kB * kMaxAttentionHead];
  float ob[kB * kMaxAttentionHead], s[kB * kB], m[kB], l[kB];
  gather_rows(q + base.q, a.q_seq, a.q_head, q0, rows, d, a.bf16, qb);
  std::fill(ob, ob + rows * d, 0.0f);
  std::fill(m, m + rows, -std::numeric_limits<float>::infinity());
  std::fill(l, l + rows, 0.0f);
  const int64_t key_end = a.causal ? std::min(a.sk, q0 + rows) : a.sk;
  for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
    const int64_t cols = std::min(kB, a.sk - k0);
    gather_cols(k + base.k, a.k_seq, a.k_head, k0, cols, d, a.bf16, kt);
    gather_rows(v + base.k, a.k_seq, a.k_head, k0, cols, d, a.bf16, vb);
    block_product(qb, kt, rows, cols, d, s);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t n = visible(a, q0 + i, k0, cols);
      if (n == 0) continue;
      float* si = s + i * kB;
      float block_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) block_max = std::max(block_max, a.scale * si[j]);
      const float m_new = std::max(m[i], block_max);
      const float alpha = fast_exp(m[i] - m_new);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < n; ++j) {
        si[j] = fast_exp(a.scale * si[j] - m_new);
        sum += si[j];
      }
      l[i] = l[i] * alpha + sum;
      m[i] = m_new;
      float* oi = ob + i * d;
#pragma omp simd
      for (int64_t c = 0; c < d; ++c) oi[c] *= alpha;
      for (int64_t j = 0; j < n; ++j) {
        const float p = operand(si[j], a.bf16);
        const float* vj = vb + j * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) oi[c] = fmadd(p, vj[c], oi[c]);
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    const float inv = 1.0f / l[i];
    float* dst = out + base.q + (q0 + i) * a.q_seq;
    for (int64_t c = 0; c < d; ++c) dst[c * a.q_head] = ob[i * d + c] * inv;
    lse[base.lse + (q0 + i) * a.lse_seq] = m[i] + std::log(l[i]);
  }
}

void check(const AttentionLayout& a) {
  TS_CHECK(a.d >= 1 && a.d <= kMaxAttentionHead, "attention: head dim ", a.d, " outside [1, ",
           kMaxAttentionHead, "]");
  TS_CHECK(!a.causal || a.sq == a.sk, "attention: causal with ", a.sq, " queries and ", a.sk,
           " keys");
}

// What the backward of one query block keeps while it walks the key blocks.
struct BackwardBlocks {
  float qb[kB * kMaxAttentionHead], dob[kB * kMaxAttentionHead];  // q, dout rows
  float kb[kB * kMaxAttentionHead];                               // k rows
  float kt[kMaxAttentionHead * kB], vt[kMaxAttentionHead * kB];   // k, v transposed
  float dq[kB * kMaxAttentionHead];                               // the query block's sum
  float p[kB * kB], dp[kB * kB];
  float lse[kB], delta[kB];
};

// Probabilities p (recomputed from the log-sum-exp) and dp = dout . v^T of
// the query block against key block k0; masked entries of p are 0.
void recompute_block(const AttentionLayout& a, const RowBase& base, int64_t q0, int64_t rows,
                     int64_t k0, int64_t cols, const float* k, const float* v, BackwardBlocks& w) {
  gather_cols(k + base.k, a.k_seq, a.k_head, k0, cols, a.d, a.bf16, w.kt);
  gather_cols(v + base.k, a.k_seq, a.k_head, k0, cols, a.d, a.bf16, w.vt);
  block_product(w.qb, w.kt, rows, cols, a.d, w.p);
  block_product(w.dob, w.vt, rows, cols, a.d, w.dp);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t n = visible(a, q0 + i, k0, cols);
    float* pi = w.p + i * kB;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) pi[j] = fast_exp(a.scale * pi[j] - w.lse[i]);
    std::fill(pi + n, pi + cols, 0.0f);
  }
}

// One query block: first delta = rowsum(p * dp) over every key it sees
// (from the same recomputed p and dp as the gradient, as softmax_grad does,
// so each row's logit gradients sum to zero as closely as the unfused
// path's), then per key block ds = scale * p * (dp - delta), dv += p^T dout,
// dk += ds^T q (into the row's dk and dv, in query-block order) and dq += ds k.
void backward_block(const AttentionLayout& a, const RowBase& base, int64_t q0, const float* q,
                    const float* k, const float* v, const float* lse, const float* dout, float* dq,
                    float* dk, float* dv, BackwardBlocks& w) {
  const int64_t d = a.d, rows = std::min(kB, a.sq - q0);
  const int64_t key_end = a.causal ? std::min(a.sk, q0 + rows) : a.sk;
  gather_rows(q + base.q, a.q_seq, a.q_head, q0, rows, d, a.bf16, w.qb);
  gather_rows(dout + base.q, a.q_seq, a.q_head, q0, rows, d, a.bf16, w.dob);
  for (int64_t i = 0; i < rows; ++i) w.lse[i] = lse[base.lse + (q0 + i) * a.lse_seq];
  std::fill(w.delta, w.delta + rows, 0.0f);
  for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
    const int64_t cols = std::min(kB, a.sk - k0);
    recompute_block(a, base, q0, rows, k0, cols, k, v, w);
    for (int64_t i = 0; i < rows; ++i) {
      float sum = 0.0f;
      for (int64_t j = 0; j < cols; ++j) sum += w.p[i * kB + j] * w.dp[i * kB + j];
      w.delta[i] += sum;
    }
  }
  std::fill(w.dq, w.dq + rows * d, 0.0f);
  for (int64_t k0 = 0; k0 < key_end; k0 += kB) {
    const int64_t cols = std::min(kB, a.sk - k0);
    recompute_block(a, base, q0, rows, k0, cols, k, v, w);
    gather_rows(k + base.k, a.k_seq, a.k_head, k0, cols, d, a.bf16, w.kb);
    for (int64_t i = 0; i < rows; ++i) {
      float* pi = w.p + i * kB;
      float* dsi = w.dp + i * kB;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) {
        dsi[j] = operand(a.scale * pi[j] * (dsi[j] - w.delta[i]), a.bf16);  // d(logits)
        pi[j] = operand(pi[j], a.bf16);
      }
    }
    for (int64_t j = 0; j < cols; ++j) {
      float* dkj = dk + base.k + (k0 + j) * a.k_seq;
      float* dvj = dv + base.k + (k0 + j) * a.k_seq;
      for (int64_t i = 0; i < rows; ++i) {
        const float pij = w.p[i * kB + j], dsij = w.dp[i * kB + j];
        const float *doi = w.dob + i * d, *qi = w.qb + i * d;
        for (int64_t c = 0; c < d; ++c) {
          dvj[c * a.k_head] = fmadd(pij, doi[c], dvj[c * a.k_head]);
          dkj[c * a.k_head] = fmadd(dsij, qi[c], dkj[c * a.k_head]);
        }
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      float* dqi = w.dq + i * d;
      for (int64_t j = 0; j < cols; ++j) {
        const float dsij = w.dp[i * kB + j];
        const float* kj = w.kb + j * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) dqi[c] = fmadd(dsij, kj[c], dqi[c]);
      }
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    float* dst = dq + base.q + (q0 + i) * a.q_seq;
    for (int64_t c = 0; c < d; ++c) dst[c * a.q_head] = w.dq[i * d + c];
  }
}

// One row: dk and dv zeroed, then the query blocks in order.
void backward_row(const AttentionLayout& a, int64_t r, const float* q, const float* k,
                  const float* v, const float* lse, const float* dout, float* dq, float* dk,
                  float* dv) {
  const RowBase base = row_base(a, r);
  for (int64_t j = 0; j < a.sk; ++j)
    for (int64_t c = 0; c < a.d; ++c) {
      dk[base.k + j * a.k_seq + c * a.k_head] = 0.0f;
      dv[base.k + j * a.k_seq + c * a.k_head] = 0.0f;
    }
  BackwardBlocks w;  // about 260 KB at the largest head dim
  for (int64_t q0 = 0; q0 < a.sq; q0 += kB)
    backward_block(a, base, q0, q, k, v, lse, dout, dq, dk, dv, w);
}

}  // namespace

int64_t AttentionLayout::rows() const {
  int64_t n = 1;
  for (int i = 0; i < row_rank; ++i) n *= row_size[i];
  return n;
}

void attention_forward(const AttentionLayout& a, const float* q, const float* k, const float* v,
                       float* out, float* lse) {
  check(a);
  const int64_t blocks = (a.sq + kB - 1) / kB, tasks = a.rows() * blocks;
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
  for (int64_t t = 0; t < tasks; ++t)
    forward_block(a, row_base(a, t / blocks), t % blocks * kB, q, k, v, out, lse);
}

void attention_backward(const AttentionLayout& a, const float* q, const float* k, const float* v,
                        const float* lse, const float* dout, float* dq, float* dk, float* dv) {
  check(a);
  const int64_t rows = a.rows();
#pragma omp parallel for schedule(dynamic, 1) if (rows > 1)
  for (int64_t r = 0; r < rows; ++r) backward_row(a, r, q, k, v, lse, dout, dq, dk, dv);
}

}  // namespace tessel::kernels
