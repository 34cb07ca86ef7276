// The bf16 einsum against the naive f32 reference: exact up to f32
// accumulation order on operands already rounded to bf16, and within bf16's
// rounding error (2^-8 relative per operand: 7 stored mantissa bits) of the
// f32 product. Both routes: oneDNN's bf16 matmul (skipped where this CPU has
// none) and the f32 GEMM on widened bf16 operands (runs everywhere).
#include "tessel/kernels/einsum_bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/random_values.h"
#include "tessel/base/bf16.h"
#include "tessel/kernels/einsum.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::kernels {
namespace {

// Round to the nearest bf16 (ties to even), kept in an f32.
float to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7fff + ((bits >> 16) & 1);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

struct Case {
  const char* name;
  Shape a, b, out;
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

std::vector<Case> cases() {
  Dim i{"i", 33}, j{"j", 17}, k{"k", 70}, n{"n", 3};
  Dim batch{"batch", 2}, seq{"seq", 9}, kseq{"kseq", 9}, heads{"heads", 3}, head{"head", 8};
  Dim x{"x", 4}, y{"y", 5}, z{"z", 6};
  return {
      {"matmul", Shape{i, k}, Shape{k, j}, Shape{i, j}},
      {"batched_transposed", Shape{n, k, i}, Shape{n, j, k}, Shape{n, i, j}},
      // attention's scores and context, straight from (batch, seq, heads, head)
      {"attention_scores", Shape{batch, seq, heads, head}, Shape{batch, kseq, heads, head},
       Shape{batch, heads, seq, kseq}},
      {"attention_context", Shape{batch, heads, seq, kseq}, Shape{batch, kseq, heads, head},
       Shape{batch, seq, heads, head}},
      {"needs_permute", Shape{x, k, y}, Shape{k, z}, Shape{x, z, y}},
      {"outer_product", Shape{i}, Shape{j}, Shape{i, j}},
      {"dot", Shape{k}, Shape{k}, Shape{}},
  };
}

class EinsumBf16Test : public ::testing::TestWithParam<Case> {};

void check_against_reference(const Case& c, Bf16Route route) {
  std::vector<float> a = random_values(c.a.numel(), 1), b = random_values(c.b.numel(), 2);
  EinsumBf16 op(c.a, c.b, c.out, true, {}, route);
  EXPECT_EQ(op.route(), route);
  EXPECT_EQ(op.scratch_bytes(), EinsumBf16(c.a, c.b, c.out, false, {}, route).scratch_bytes())
      << "a plan-only instance must reserve the same scratch";
  AlignedBuffer scratch(op.scratch_bytes());
  std::vector<float> out(c.out.numel(), -1.0f);
  op.run(a.data(), b.data(), out.data(), scratch.data());

  // Reference on bf16-rounded operands: differs only in accumulation order.
  std::vector<float> a16(a), b16(b), ref16(out.size()), ref32(out.size()), absref(out.size());
  for (float& v : a16) v = to_bf16(v);
  for (float& v : b16) v = to_bf16(v);
  einsum_ref(c.a, a16.data(), c.b, b16.data(), c.out, ref16.data());
  einsum_ref(c.a, a.data(), c.b, b.data(), c.out, ref32.data());
  std::vector<float> aa(a), bb(b);
  for (float& v : aa) v = std::fabs(v);
  for (float& v : bb) v = std::fabs(v);
  einsum_ref(c.a, aa.data(), c.b, bb.data(), c.out, absref.data());  // sum |a||b| per output
  for (size_t e = 0; e < out.size(); ++e) {
    EXPECT_NEAR(out[e], ref16[e], 1e-5 * absref[e] + 1e-7) << c.name << " element " << e;
    // Each operand is off by at most 2^-8 relative: each product by 2^-7.
    EXPECT_NEAR(out[e], ref32[e], std::ldexp(1.0, -7) * absref[e] + 1e-7)
        << c.name << " element " << e;
  }
  // Operands handed over already in bf16 (a weight's once-per-step copy):
  // read in place or reordered, the same products up to accumulation order.
  std::vector<uint16_t> a_bf16(a.size()), b_bf16(b.size());
  round_to_bf16(a.data(), a_bf16.data(), static_cast<int64_t>(a.size()));
  round_to_bf16(b.data(), b_bf16.data(), static_cast<int64_t>(b.size()));
  for (Bf16Operands in :
       {Bf16Operands{true, false}, Bf16Operands{false, true}, Bf16Operands{true, true}}) {
    EinsumBf16 pre(c.a, c.b, c.out, true, in, route);
    AlignedBuffer pre_scratch(pre.scratch_bytes());
    std::vector<float> pre_out(out.size(), -1.0f);
    pre.run(in.a ? static_cast<const void*>(a_bf16.data()) : a.data(),
            in.b ? static_cast<const void*>(b_bf16.data()) : b.data(), pre_out.data(),
            pre_scratch.data());
    for (size_t e = 0; e < out.size(); ++e)
      EXPECT_NEAR(pre_out[e], ref16[e], 1e-5 * absref[e] + 1e-7)
          << c.name << " bf16 inputs " << in.a << in.b << " element " << e;
  }
  // Not a silent f32 path: bf16 rounding must show somewhere.
  double max_diff = 0;
  for (size_t e = 0; e < out.size(); ++e)
    max_diff = std::max<double>(max_diff, std::fabs(out[e] - ref32[e]));
  EXPECT_GT(max_diff, 0.0) << c.name << " matches f32 exactly";
}

TEST_P(EinsumBf16Test, OneDnnMatchesReference) {
  if (!onednn_has_bf16_matmul())
    GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU (" << onednn_cpu_isa() << ")";
  check_against_reference(GetParam(), Bf16Route::kOneDnn);
}

TEST_P(EinsumBf16Test, WidenedF32MatchesReference) {
  check_against_reference(GetParam(), Bf16Route::kWidenedF32);
}

// A fused bias (oneDNN's route) gives the bits of adding it in f32 to the
// product afterwards: element e of out gets bias[its index over the n dims].
TEST_P(EinsumBf16Test, OneDnnBiasIsTheAddAfterTheProduct) {
  if (!onednn_has_bf16_matmul())
    GTEST_SKIP() << "no bf16 matmul in oneDNN on this CPU (" << onednn_cpu_isa() << ")";
  const Case& c = GetParam();
  const EinsumGroups groups = einsum_groups(c.a, c.b, c.out);
  if (groups.n.empty()) GTEST_SKIP() << c.name << " has no n dims";
  const std::vector<float> a = random_values(c.a.numel(), 5), b = random_values(c.b.numel(), 6),
                           bias = random_values(group_size(c.out, groups.n), 7);
  EinsumBf16 plain(c.a, c.b, c.out, true, {}, Bf16Route::kOneDnn);
  EinsumBf16 biased(c.a, c.b, c.out, true, {}, Bf16Route::kOneDnn, /*with_bias=*/true);
  AlignedBuffer s1(plain.scratch_bytes()), s2(biased.scratch_bytes());
  std::vector<float> product(c.out.numel()), got(c.out.numel());
  plain.run(a.data(), b.data(), product.data(), s1.data());
  biased.run(a.data(), b.data(), got.data(), s2.data(), bias.data());
  for (int64_t e = 0; e < c.out.numel(); ++e) {
    int64_t rest = e, n_index = 0, n_stride = 1;
    for (int d = c.out.rank() - 1; d >= 0; --d) {
      const int64_t i = rest % c.out[d].size;
      rest /= c.out[d].size;
      if (std::find(groups.n.begin(), groups.n.end(), c.out[d].name) == groups.n.end()) continue;
      n_index += i * n_stride;
      n_stride *= c.out[d].size;
    }
    EXPECT_EQ(got[e], product[e] + bias[n_index]) << c.name << " element " << e;
  }
}

// The widened route is the f32 GEMM on the bf16-rounded operands, bit for
// bit (the same plan, the same summation order), whether an operand comes
// in f32 or as a bf16 copy.
TEST_P(EinsumBf16Test, WidenedF32IsTheF32GemmOnRoundedOperands) {
  const Case& c = GetParam();
  std::vector<float> a = random_values(c.a.numel(), 3), b = random_values(c.b.numel(), 4);
  std::vector<float> a16(a), b16(b);
  round_bf16_in_f32(a16.data(), a16.data(), static_cast<int64_t>(a16.size()));
  round_bf16_in_f32(b16.data(), b16.data(), static_cast<int64_t>(b16.size()));
  const EinsumPlan plan = plan_einsum(c.a, c.b, c.out);
  std::vector<float> plan_scratch(plan.scratch_elements() + 1), want(c.out.numel(), -1.0f);
  einsum(plan, a16.data(), b16.data(), want.data(), plan_scratch.data());
  std::vector<uint16_t> b_bits(b.size());
  round_to_bf16(b.data(), b_bits.data(), static_cast<int64_t>(b.size()));
  for (Bf16Operands in : {Bf16Operands{false, false}, Bf16Operands{false, true}}) {
    EinsumBf16 op(c.a, c.b, c.out, true, in, Bf16Route::kWidenedF32);
    // Both f32 copies and the f32 plan's own permute scratch.
    const size_t floats = c.a.numel() + c.b.numel() + plan.scratch_elements();
    EXPECT_GE(op.scratch_bytes(), floats * sizeof(float));
    EXPECT_LT(op.scratch_bytes(), floats * sizeof(float) + 3 * 64);
    AlignedBuffer scratch(op.scratch_bytes());
    std::vector<float> got(c.out.numel(), -1.0f);
    op.run(a.data(), in.b ? static_cast<const void*>(b_bits.data()) : b.data(), got.data(),
           scratch.data());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << c.name << " bf16 b " << in.b;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, EinsumBf16Test, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(EinsumBf16, NoteNamesTheIsaAndRoute) {
  const std::string note = bf16_matmul_note();
  EXPECT_NE(note.find(onednn_cpu_isa()), std::string::npos) << note;
  EXPECT_EQ(note.find("slower than f32") == std::string::npos, cpu_has_native_bf16()) << note;
  EXPECT_EQ(note.find("by f32 GEMM on widened bf16 operands") != std::string::npos,
            bf16_route() == Bf16Route::kWidenedF32)
      << note;
  EXPECT_EQ(bf16_route() == Bf16Route::kOneDnn, onednn_has_bf16_matmul());
}

// A plan for another machine sizes the oneDNN route; by default plans size
// this CPU's own route, so a dry run predicts this machine's run.
TEST(EinsumBf16, PlanRouteDefaultsToThisCpuAndCanBeSet) {
  EXPECT_EQ(plan_bf16_route(), bf16_route());
  set_plan_bf16_route(Bf16Route::kOneDnn);
  EXPECT_EQ(plan_bf16_route(), Bf16Route::kOneDnn);
  const Shape a{{"i", 8}, {"k", 16}}, b{{"k", 16}, {"j", 4}}, out{{"i", 8}, {"j", 4}};
  EXPECT_EQ(EinsumBf16(a, b, out, false).route(), Bf16Route::kOneDnn);
  set_plan_bf16_route(std::nullopt);
  EXPECT_EQ(EinsumBf16(a, b, out, false).route(), bf16_route());
  EXPECT_EQ(EinsumBf16(a, b, out).route(), bf16_route());
}

// A plan for another machine sizes every bf16 einsum by the
// device-independent rule, whatever oneDNN would choose on this CPU: f32
// operands as dense bf16 copies, bf16 ones and the output in place where
// their groups merge into one strided index, else C staged in f32; no
// library workspace. (On a CPU with oneDNN bf16 these sizes used to be
// oneDNN's own choice here.)
TEST(EinsumBf16, PlanForAnotherMachineSizesScratchWithoutThisCpu) {
  set_plan_bf16_route(Bf16Route::kOneDnn);
  const Shape a{{"i", 8}, {"k", 16}}, b{{"k", 16}, {"j", 4}};
  const Shape out{{"i", 8}, {"j", 4}};
  // Both f32 operands copied (8 x 16 and 16 x 4 bf16, each rounded up to
  // 64 bytes), the output written in place.
  const EinsumBf16 dense(a, b, out, false);
  EXPECT_EQ(dense.scratch_bytes(), 256u + 128u);
  EXPECT_NE(dense.implementation().find("estimated for another machine"), std::string::npos)
      << dense.implementation();
  // Both operands given in bf16 and read in place: nothing.
  EXPECT_EQ(EinsumBf16(a, b, out, false, {true, true, false}).scratch_bytes(), 0u);
  // An output whose m dims (i1, i2) do not merge: C staged in f32 (8 x 4).
  const Shape a2{{"i1", 2}, {"i2", 4}, {"k", 16}};
  const Shape out2{{"i1", 2}, {"j", 4}, {"i2", 4}};
  EXPECT_EQ(EinsumBf16(a2, b, out2, false, {true, true, false}).scratch_bytes(), 128u);
  set_plan_bf16_route(std::nullopt);
}

}  // namespace
}  // namespace tessel::kernels
