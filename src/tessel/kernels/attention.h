// Fused attention on the CPU (FlashAttention-2's algorithm, blocked).
//
// Forward: out = softmax(scale * q.k^T, causal mask optional) . v and the
// per-row log-sum-exp of the scaled logits, computed query block by key
// block with a running max and sum, so the (query, key) probabilities are
// never stored. Backward: the probabilities are recomputed block by block
// from q, k and the log-sum-exp (FlashAttention-2's backward), giving dq, dk
// and dv; in one process each row's delta = sum(p * dp) is summed from the
// recomputed blocks rather than taken as dout . out, so the logits'
// gradient is as consistent as softmax_grad's (docs/attention.md).
// attention_backward keeps one query block's p and dp for all its keys, so
// each is computed once; ring attention, whose keys are spread over the
// ranks, takes delta as dout . out and makes the same five products per
// pair, one key chunk at a time.
// Invariants: blocks have fixed sizes (kAttentionBlock) and each task (a
// row and query block forward, a row backward) runs sequentially on one
// thread, so results are bitwise the same run to run and for any thread
// count. Statistics and sums are f32; with `bf16`, the operands of each
// product (q, k, v, the probabilities, dout and the logits' gradient) are
// rounded to bf16 first, as a bf16 program's einsums round theirs.
#pragma once

#include <cstdint>

namespace tessel::kernels {

inline constexpr int64_t kAttentionBlock = 64;     // query and key rows per block
inline constexpr int64_t kMaxAttentionHead = 128;  // head dim; blocks live on the stack
inline constexpr int kMaxAttentionRowDims = 6;

// Dropout on the probabilities (p > 0): entry (row r, query i, key j) is
// kept, times 1 / (1 - p), iff DropoutMask(p, seed, key_hash, step) keeps
// counter base + sum_d idx_d(r) * row[d] + (query0 + i) * query +
// (key0 + j) * key (kernels/dropout.h): a pure function of global indices,
// so every sharding and the backward's recomputation draw the same mask.
// out = D(P) v, D the scaled mask; the backward forms the same blocks.
struct AttentionDropout {
  float p = 0.0f;
  uint64_t seed = 0, key_hash = 0, step = 0;
  int64_t base = 0;                        // shard offsets of the row dims folded in
  int64_t row[kMaxAttentionRowDims] = {};  // counter stride of each row dim
  int64_t query = 0, key = 0;              // counter strides of the positions
  int64_t query0 = 0, key0 = 0;            // global position of the first query, key
};

// Where each value lives: `rows` independent attentions (batch, heads...),
// the product of up to kMaxAttentionRowDims dims; strides in elements. q,
// out, dout and dq share q's strides; k, v, dk and dv share k's.
struct AttentionLayout {
  int64_t sq = 0, sk = 0, d = 0;  // queries, keys, head dim
  int row_rank = 0;
  int64_t row_size[kMaxAttentionRowDims] = {};
  int64_t q_row[kMaxAttentionRowDims] = {}, k_row[kMaxAttentionRowDims] = {},
          lse_row[kMaxAttentionRowDims] = {};
  int64_t q_seq = 0, q_head = 0, k_seq = 0, k_head = 0, lse_seq = 0;
  bool causal = false;  // key j masked for query i when j > i + causal_shift (sq == sk)
  float scale = 1.0f;
  bool bf16 = false;
  // Ring attention (context parallelism): the query chunk's first global
  // position minus the key chunk's, >= 0 when causal (a query chunk never
  // meets a later key chunk: that pair is skipped, not computed).
  int64_t causal_shift = 0;
  // Backward: dq, dk and dv are added to rather than written (ring
  // attention sums dq over key chunks, dk and dv over query chunks).
  bool accumulate = false;
  AttentionDropout dropout;

  int64_t rows() const;
  // Element offsets of row r's first element in q, k and lse; the row's
  // dropout counter (AttentionDropout: base and the row dims' share).
  struct RowBase {
    int64_t q = 0, k = 0, lse = 0, drop = 0;
  };
  RowBase row_base(int64_t r) const;
};

// An input as the program stores it: f32, or bf16 (a bf16 program stores q,
// k, v and dout in bf16 when only products read them; they are rounded to
// bf16 here anyway).
struct AttentionInput {
  const void* data = nullptr;
  bool bf16 = false;
};

void attention_forward(const AttentionLayout& a, AttentionInput q, AttentionInput k,
                       AttentionInput v, float* out, float* lse);

// dq, dk and dv are written (not accumulated; a.accumulate is refused).
// scratch holds attention_backward_scratch_floats(a, threads) floats: each
// query's delta = rowsum(p * dp) (rows() * sq floats), then one block per
// thread (at most one per row) of (2 * kAttentionBlock + 5 * d') * sk'
// floats (d' the head dim rounded up to 32, sk' the keys to
// kAttentionBlock): the row's keys, one query block's p and dp, the row's
// dk and dv sums. It runs on at most `threads` threads, whatever OpenMP's
// count (the blocks are the scratch's), and allocates nothing. Bitwise the
// same dq, dk and dv as attention_backward_grads given the delta it sums,
// for any thread count.
void attention_backward(const AttentionLayout& a, AttentionInput q, AttentionInput k,
                        AttentionInput v, const float* lse, AttentionInput dout, float* dq,
                        float* dk, float* dv, float* scratch, int threads);
int64_t attention_backward_scratch_floats(const AttentionLayout& a, int threads);
// Ring attention's backward (which cannot sum delta from p and dp: a
// query's keys are spread over the ring): each query's delta =
// rowsum(dout * out) (FlashAttention-2's; rows() * sq floats, laid out as
// attention_backward's scratch; dout rounded to bf16 first for a bf16
// layout, as the products round it; no block products); then, per key
// chunk, dq, dk and dv given the complete delta (five block products per
// pair; with a.accumulate, added to dq, dk and dv).
void attention_output_delta(const AttentionLayout& a, AttentionInput dout, const float* out,
                            float* delta);
void attention_backward_grads(const AttentionLayout& a, AttentionInput q, AttentionInput k,
                              AttentionInput v, const float* lse, AttentionInput dout,
                              const float* delta, float* dq, float* dk, float* dv);

// Naive twins (the op harness's reference): whole rows of probabilities,
// sums in double, no blocks, one thread.
void attention_forward_ref(const AttentionLayout& a, const float* q, const float* k, const float* v,
                           float* out, float* lse);
void attention_backward_ref(const AttentionLayout& a, const float* q, const float* k,
                            const float* v, const float* lse, const float* dout, float* dq,
                            float* dk, float* dv);

}  // namespace tessel::kernels
