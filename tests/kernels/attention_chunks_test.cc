// The kernel entry points ring attention (backend/cpu/ring_attention.h)
// builds on, checked in one process: a causal attention cut into query and
// key chunks, each query chunk computed against the key chunks at or before
// it (causal_shift), the pairs' outputs merged by their log-sum-exps, and
// the backward ring attention runs (each query's delta = rowsum(dout *
// out), then dq, dk, dv accumulated pair by pair) equal the whole attention
// within 1e-5 of the largest value.
// So do the half pairs of ring attention's balanced order (rank r of n
// holds sequence halves r and 2n-1-r of 2n; sharding/context_parallel.h),
// in each rank's ring order, where every rank computes the same causal work
// at every step. attention_backward (one pass, five block products per
// pair) is bitwise attention_backward_grads given the delta it sums.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/random_values.h"
#include "tessel/kernels/attention.h"
#include "tessel/sharding/context_parallel.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kHeads = 2, kHead = 16, kChunk = 70, kChunks = 3, kSeq = kChunk * kChunks;

// (heads, seq, head) contiguous, `len` queries and keys, strides of the whole.
AttentionLayout layout(int64_t len) {
  AttentionLayout a;
  a.sq = a.sk = len;
  a.d = kHead;
  a.row_rank = 1;
  a.row_size[0] = kHeads;
  a.q_row[0] = a.k_row[0] = kSeq * kHead;
  a.lse_row[0] = kSeq;
  a.q_seq = a.k_seq = kHead;
  a.q_head = a.k_head = 1;
  a.lse_seq = 1;
  a.causal = true;
  a.scale = 0.25f;
  return a;
}

double max_abs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); ++i) e = std::max(e, std::abs(double(a[i]) - b[i]));
  return e / max_abs(b);
}

AttentionInput in(const std::vector<float>& x, int64_t offset) {
  return {x.data() + offset, false};
}

// Merges (p_out, p_lse) into (c_out, c_lse) for queries [first, first + len).
void merge_rows(std::vector<float>& c_out, std::vector<float>& c_lse,
                const std::vector<float>& p_out, const std::vector<float>& p_lse, int64_t first,
                int64_t len) {
  for (int64_t h = 0; h < kHeads; ++h)
    for (int64_t i = first; i < first + len; ++i) {
      const int64_t j = h * kSeq + i;
      const float m = std::max(c_lse[j], p_lse[j]);
      const float total = m + std::log(std::exp(c_lse[j] - m) + std::exp(p_lse[j] - m));
      const float wa = std::exp(c_lse[j] - total), wb = std::exp(p_lse[j] - total);
      c_lse[j] = total;
      for (int64_t c = 0; c < kHead; ++c) {
        const int64_t e = j * kHead + c;
        c_out[e] = c_out[e] * wa + p_out[e] * wb;
      }
    }
}

TEST(AttentionChunks, CausalChunkPairsMergeToTheWholeAttention) {
  const int64_t n = kHeads * kSeq * kHead;
  const std::vector<float> q = random_values(n, 1), k = random_values(n, 2),
                           v = random_values(n, 3), dout = random_values(n, 4);
  std::vector<float> out(n), lse(kHeads * kSeq), dq(n), dk(n), dv(n),
      scratch(attention_backward_scratch_floats(layout(kSeq), 2));
  attention_forward(layout(kSeq), in(q, 0), in(k, 0), in(v, 0), out.data(), lse.data());
  attention_backward(layout(kSeq), in(q, 0), in(k, 0), in(v, 0), lse.data(), in(dout, 0), dq.data(),
                     dk.data(), dv.data(), scratch.data(), 2);

  std::vector<float> c_out(n), c_lse(kHeads * kSeq), p_out(n), p_lse(kHeads * kSeq);
  std::vector<float> c_dq(n, 0.0f), c_dk(n, 0.0f), c_dv(n, 0.0f);
  // Each query chunk's deltas, row by row (the kernel's scratch layout).
  std::vector<std::vector<float>> delta(kChunks, std::vector<float>(kHeads * kChunk, 0.0f));
  for (int64_t r = 0; r < kChunks; ++r) {
    const int64_t qo = r * kChunk * kHead, lo = r * kChunk;
    for (int64_t s = 0; s <= r; ++s) {
      AttentionLayout a = layout(kChunk);
      a.causal_shift = (r - s) * kChunk;
      const int64_t ko = s * kChunk * kHead;
      float* o = (s == 0 ? c_out : p_out).data() + qo;
      float* l = (s == 0 ? c_lse : p_lse).data() + lo;
      attention_forward(a, in(q, qo), in(k, ko), in(v, ko), o, l);
      if (s != 0) merge_rows(c_out, c_lse, p_out, p_lse, lo, kChunk);
    }
  }
  EXPECT_LE(relative_error(c_out, out), 1e-5);
  EXPECT_LE(relative_error(c_lse, lse), 1e-5);

  for (int64_t r = 0; r < kChunks; ++r)
    attention_output_delta(layout(kChunk), in(dout, r * kChunk * kHead),
                           c_out.data() + r * kChunk * kHead, delta[r].data());
  for (int64_t r = 0; r < kChunks; ++r)
    for (int64_t s = 0; s <= r; ++s) {
      AttentionLayout a = layout(kChunk);
      a.causal_shift = (r - s) * kChunk;
      a.accumulate = true;
      const int64_t qo = r * kChunk * kHead, ko = s * kChunk * kHead, lo = r * kChunk;
      attention_backward_grads(a, in(q, qo), in(k, ko), in(v, ko), lse.data() + lo, in(dout, qo),
                               delta[r].data(), c_dq.data() + qo, c_dk.data() + ko,
                               c_dv.data() + ko);
    }
  EXPECT_LE(relative_error(c_dq, dq), 1e-5);
  EXPECT_LE(relative_error(c_dk, dk), 1e-5);
  EXPECT_LE(relative_error(c_dv, dv), 1e-5);
  EXPECT_GT(max_abs(dk), 0.0);
}

// Ring attention's balanced order on kChunks ranks: 2 kChunks halves of
// kChunk / 2 positions; at step t rank r meets the keys of rank r - t.
TEST(AttentionChunks, BalancedHalfPairsMergeToTheWholeAttentionWithEqualWorkPerStep) {
  const int ranks = kChunks;
  const int64_t half = kChunk / 2, n = kHeads * kSeq * kHead;
  const std::vector<float> q = random_values(n, 5), k = random_values(n, 6),
                           v = random_values(n, 7), dout = random_values(n, 8);
  std::vector<float> out(n), lse(kHeads * kSeq), dq(n), dk(n), dv(n),
      scratch(attention_backward_scratch_floats(layout(kSeq), 2));
  attention_forward(layout(kSeq), in(q, 0), in(k, 0), in(v, 0), out.data(), lse.data());
  attention_backward(layout(kSeq), in(q, 0), in(k, 0), in(v, 0), lse.data(), in(dout, 0), dq.data(),
                     dk.data(), dv.data(), scratch.data(), 2);
  // Each rank's ring: calls f(query half, key half) for the half pairs it
  // computes, step by step, and checks each step's work (a diagonal half
  // pair is half a full one) is the same on every rank: two full half pairs.
  auto each_pair = [&](auto f) {
    for (int r = 0; r < ranks; ++r)
      for (int t = 0; t < ranks; ++t) {
        const int owner = (r - t + ranks) % ranks;
        double work = 0;
        for (int a = 0; a < 2; ++a)
          for (int b = 0; b < 2; ++b) {
            const int qh = tessel::half_at(tessel::HalfOrder::kBalanced, r, ranks, a),
                      kh = tessel::half_at(tessel::HalfOrder::kBalanced, owner, ranks, b);
            if (kh > qh) continue;
            work += qh == kh ? 0.5 : 1.0;
            f(qh, kh);
          }
        EXPECT_EQ(work, 2.0) << "rank " << r << " step " << t;
      }
  };
  auto half_layout = [&](int qh, int kh) {
    AttentionLayout a = layout(half);
    a.causal_shift = (qh - kh) * half;
    return a;
  };
  std::vector<float> c_out(n), c_lse(kHeads * kSeq), p_out(n), p_lse(kHeads * kSeq);
  std::vector<bool> written(2 * ranks, false);
  each_pair([&](int qh, int kh) {
    const int64_t qo = qh * half * kHead, ko = kh * half * kHead, lo = qh * half;
    const bool first = !written[qh];
    written[qh] = true;
    attention_forward(half_layout(qh, kh), in(q, qo), in(k, ko), in(v, ko),
                      (first ? c_out : p_out).data() + qo, (first ? c_lse : p_lse).data() + lo);
    if (!first) merge_rows(c_out, c_lse, p_out, p_lse, lo, half);
  });
  EXPECT_LE(relative_error(c_out, out), 1e-5);
  EXPECT_LE(relative_error(c_lse, lse), 1e-5);

  std::vector<float> c_dq(n, 0.0f), c_dk(n, 0.0f), c_dv(n, 0.0f);
  std::vector<std::vector<float>> delta(2 * ranks, std::vector<float>(kHeads * half, 0.0f));
  for (int qh = 0; qh < 2 * ranks; ++qh)
    attention_output_delta(half_layout(qh, qh), in(dout, qh * half * kHead),
                           c_out.data() + qh * half * kHead, delta[qh].data());
  each_pair([&](int qh, int kh) {
    AttentionLayout a = half_layout(qh, kh);
    a.accumulate = true;
    const int64_t qo = qh * half * kHead, ko = kh * half * kHead, lo = qh * half;
    attention_backward_grads(a, in(q, qo), in(k, ko), in(v, ko), lse.data() + lo, in(dout, qo),
                             delta[qh].data(), c_dq.data() + qo, c_dk.data() + ko,
                             c_dv.data() + ko);
  });
  EXPECT_LE(relative_error(c_dq, dq), 1e-5);
  EXPECT_LE(relative_error(c_dk, dk), 1e-5);
  EXPECT_LE(relative_error(c_dv, dv), 1e-5);
  EXPECT_GT(max_abs(dk), 0.0);
}

// attention_backward's one pass over each row's query blocks sums dq, dk
// and dv in the same order as attention_backward_grads given the delta the
// pass summed (rowsum(p * dp)), so they are bitwise equal: causal and not,
// whole and partial blocks, f32 and bf16 operands. In f32 that delta and
// ring attention's rowsum(dout * out) agree within 1e-5 of the largest.
TEST(AttentionChunks, OnePassBackwardIsBitwiseTheGradsGivenItsDelta) {
  const int64_t n = kHeads * kSeq * kHead;
  const std::vector<float> q = random_values(n, 5), k = random_values(n, 6),
                           v = random_values(n, 7), dout = random_values(n, 8);
  for (const int64_t len : {kSeq, int64_t{128}, int64_t{64}, int64_t{5}})
    for (const bool causal : {true, false})
      for (const bool bf16 : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "len " << len << " causal " << causal << " bf16 " << bf16);
        AttentionLayout a = layout(len);
        a.causal = causal;
        a.bf16 = bf16;
        std::vector<float> out(n), lse(kHeads * kSeq),
            scratch(attention_backward_scratch_floats(a, 2));
        attention_forward(a, in(q, 0), in(k, 0), in(v, 0), out.data(), lse.data());
        std::vector<float> dq(n, 0.0f), dk(n, 0.0f), dv(n, 0.0f);
        attention_backward(a, in(q, 0), in(k, 0), in(v, 0), lse.data(), in(dout, 0), dq.data(),
                           dk.data(), dv.data(), scratch.data(), 2);
        const std::vector<float> delta(scratch.begin(), scratch.begin() + kHeads * len);
        std::vector<float> dq2(n, 0.0f), dk2(n, 0.0f), dv2(n, 0.0f), delta2(kHeads * len);
        attention_backward_grads(a, in(q, 0), in(k, 0), in(v, 0), lse.data(), in(dout, 0),
                                 delta.data(), dq2.data(), dk2.data(), dv2.data());
        attention_output_delta(a, in(dout, 0), out.data(), delta2.data());
        if (!bf16) {
          EXPECT_LE(relative_error(delta2, delta), 1e-5);
        }
        EXPECT_GT(max_abs(delta), 0.0);
        EXPECT_EQ(dq, dq2);
        EXPECT_EQ(dk, dk2);
        EXPECT_EQ(dv, dv2);
        EXPECT_GT(max_abs(dk), 0.0);
      }
}

}  // namespace
}  // namespace tessel::kernels
