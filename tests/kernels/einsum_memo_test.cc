// plan_einsum_memo (kernels/einsum_memo.h) returns plan_einsum's plan field
// for field, for a shape triple seen before and for one that differs only
// in a dim's size or name (the memo compares whole shapes, not only hashes).
#include "tessel/kernels/einsum_memo.h"

#include <gtest/gtest.h>

namespace tessel::kernels {
namespace {

void expect_same(const GemmOperand& a, const GemmOperand& b) {
  EXPECT_EQ(a.permute, b.permute);
  EXPECT_EQ(a.canon_strides, b.canon_strides);
  EXPECT_EQ(a.canon_sizes, b.canon_sizes);
  EXPECT_EQ(a.transposed, b.transposed);
  EXPECT_EQ(a.ld, b.ld);
  EXPECT_EQ(a.batch_offsets, b.batch_offsets);
  EXPECT_EQ(a.restride_ld, b.restride_ld);
}

void expect_same(const EinsumPlan& a, const EinsumPlan& b) {
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.swap, b.swap);
  expect_same(a.a, b.a);
  expect_same(a.b, b.b);
  expect_same(a.c, b.c);
  EXPECT_EQ(a.scratch_a, b.scratch_a);
  EXPECT_EQ(a.scratch_b, b.scratch_b);
  EXPECT_EQ(a.scratch_c, b.scratch_c);
}

TEST(EinsumMemo, ReturnsWhatPlanEinsumReturns) {
  // Attention scores (batch dims, a permuted output) and a plain matmul,
  // each twice, then the matmul with another size and another dim name.
  const Shape q{{"batch", 2}, {"seq", 8}, {"heads", 3}, {"head", 4}};
  const Shape k{{"batch", 2}, {"key", 8}, {"heads", 3}, {"head", 4}};
  const Shape scores{{"batch", 2}, {"heads", 3}, {"seq", 8}, {"key", 8}};
  const Shape x{{"rows", 5}, {"embed", 6}}, w{{"embed", 6}, {"out", 7}}, y{{"rows", 5}, {"out", 7}};
  for (int round = 0; round < 2; ++round) {
    expect_same(plan_einsum_memo(q, k, scores), plan_einsum(q, k, scores));
    expect_same(plan_einsum_memo(x, w, y), plan_einsum(x, w, y));
  }
  const Shape x9{{"rows", 9}, {"embed", 6}}, y9{{"rows", 9}, {"out", 7}};
  expect_same(plan_einsum_memo(x9, w, y9), plan_einsum(x9, w, y9));
  EXPECT_EQ(plan_einsum_memo(x9, w, y9).m, 9);
  const Shape xt{{"embed", 6}, {"rows", 5}};  // the same dims, transposed
  expect_same(plan_einsum_memo(xt, w, y), plan_einsum(xt, w, y));
}

}  // namespace
}  // namespace tessel::kernels
