// The f32 einsum copies an operand stored as k lines with a leading
// dimension a multiple of 2 KiB into scratch with a padded one, beside 64-383
// rows or columns of the other operand (kernels/einsum.h): a read
// transposed, b as stored, either of them as sgemm's A (b when the product
// is swapped), a batched operand. The plan states the scratch and the product
// matches the naive reference; other leading dimensions and other widths are
// read in place.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/random_values.h"
#include "tessel/kernels/einsum.h"

namespace tessel::kernels {
namespace {

// Runs the plan and compares with einsum_ref, relative to sum |a||b|.
void expect_matches_reference(const Shape& sa, const Shape& sb, const Shape& so) {
  const EinsumPlan plan = plan_einsum(sa, sb, so);
  const std::vector<float> a = random_values(sa.numel(), 1), b = random_values(sb.numel(), 2);
  std::vector<float> scratch(plan.scratch_elements()), out(so.numel(), -1.0f), ref(so.numel()),
      absref(so.numel());
  einsum(plan, a.data(), b.data(), out.data(), scratch.data());
  einsum_ref(sa, a.data(), sb, b.data(), so, ref.data());
  std::vector<float> aa(a), bb(b);
  for (float& v : aa) v = std::fabs(v);
  for (float& v : bb) v = std::fabs(v);
  einsum_ref(sa, aa.data(), sb, bb.data(), so, absref.data());
  for (size_t e = 0; e < out.size(); ++e)
    ASSERT_NEAR(out[e], ref[e], 1e-5 * absref[e] + 1e-7) << "element " << e;
}

TEST(EinsumRestride, WeightGradientReadsATransposedCopy) {
  // dW[d, o] = sum over tokens of x[tokens, d] dy[tokens, o]: x is read
  // transposed, 512 floats apart, beside 128 columns of dy.
  const Shape x{{"tokens", 40}, {"d", 512}}, dy{{"tokens", 40}, {"o", 128}},
      dw{{"d", 512}, {"o", 128}};
  const EinsumPlan plan = plan_einsum(x, dy, dw);
  ASSERT_FALSE(plan.swap);
  EXPECT_TRUE(plan.a.transposed);
  EXPECT_FALSE(plan.a.permute);
  EXPECT_EQ(plan.a.restride_ld, 528);
  EXPECT_EQ(plan.scratch_a, 40 * 528);
  EXPECT_EQ(plan.b.restride_ld, 0);
  expect_matches_reference(x, dy, dw);
}

TEST(EinsumRestride, SwappedProductRestridesB) {
  // The output's m dim (d) is the contiguous one, so C^T = B^T A^T: dy,
  // 1024 floats a row, is the sgemm's transposed A, beside 96 rows of x.
  const Shape x{{"tokens", 24}, {"d", 96}}, dy{{"tokens", 24}, {"o", 1024}},
      dw{{"o", 1024}, {"d", 96}};
  const EinsumPlan plan = plan_einsum(x, dy, dw);
  ASSERT_TRUE(plan.swap);
  EXPECT_EQ(plan.b.restride_ld, 1040);
  EXPECT_EQ(plan.scratch_b, 24 * 1040);
  EXPECT_EQ(plan.a.restride_ld, 0);
  expect_matches_reference(x, dy, dw);
}

TEST(EinsumRestride, BBesideFewRowsIsRestrided) {
  // dW[d, o] with d = 256 rows: dy, 1024 floats a token, is the sgemm's B.
  const Shape x{{"tokens", 40}, {"d", 256}}, dy{{"tokens", 40}, {"o", 1024}},
      dw{{"d", 256}, {"o", 1024}};
  const EinsumPlan plan = plan_einsum(x, dy, dw);
  ASSERT_FALSE(plan.swap);
  EXPECT_EQ(plan.a.restride_ld, 0);  // 256 floats apart: no aliasing
  EXPECT_EQ(plan.b.restride_ld, 1040);
  EXPECT_EQ(plan.scratch_b, 40 * 1040);
  expect_matches_reference(x, dy, dw);
  // Beside 384 rows or more, and beside fewer than 64, B is read in place.
  EXPECT_EQ(plan_einsum(Shape{{"tokens", 40}, {"d", 384}}, dy, Shape{{"d", 384}, {"o", 1024}})
                .b.restride_ld,
            0);
  EXPECT_EQ(plan_einsum(Shape{{"tokens", 40}, {"d", 32}}, dy, Shape{{"d", 32}, {"o", 1024}})
                .b.restride_ld,
            0);
}

TEST(EinsumRestride, BatchedAttentionGradient) {
  // dK[batch, kseq, heads, head] = dS[batch, heads, seq, kseq] . q: dS is
  // read transposed per (batch, head), 512 keys a row, beside 64 columns.
  const Dim batch{"batch", 2}, heads{"heads", 2}, seq{"seq", 6}, kseq{"kseq", 512},
      head{"head", 64};
  const Shape ds{batch, heads, seq, kseq}, q{batch, seq, heads, head}, dk{batch, kseq, heads, head};
  const EinsumPlan plan = plan_einsum(ds, q, dk);
  ASSERT_EQ(plan.batch, 4);
  EXPECT_EQ(plan.a.restride_ld, 528);
  EXPECT_EQ(plan.scratch_a, 4 * 6 * 528);
  expect_matches_reference(ds, q, dk);
}

TEST(EinsumRestride, ALeadingDimensionThatDoesNotAliasIsReadInPlace) {
  const Shape x{{"tokens", 40}, {"d", 384}}, dy{{"tokens", 40}, {"o", 24}},
      dw{{"d", 384}, {"o", 24}};
  const EinsumPlan plan = plan_einsum(x, dy, dw);
  EXPECT_TRUE(plan.a.transposed);
  EXPECT_EQ(plan.a.restride_ld, 0);
  EXPECT_EQ(plan.scratch_elements(), 0);
  // Read as stored (not transposed): no copy whatever its leading dimension.
  const Shape h{{"tokens", 8}, {"ff", 1024}}, w{{"ff", 1024}, {"o", 24}},
      y{{"tokens", 8}, {"o", 24}};
  EXPECT_EQ(plan_einsum(h, w, y).scratch_elements(), 0);
}

}  // namespace
}  // namespace tessel::kernels
