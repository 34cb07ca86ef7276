// Fused attention (kernels/attention.h through the attention op) against the
// unfused einsum-softmax-einsum sequence the built-in GPT used: forward and
// gradients within 1e-6 of the largest value in f32; bitwise the same run to
// run and for any thread count; the bf16 path close to the unfused bf16 program,
// on bf16 dot products as on f32 ones. With dropout on the probabilities
// (the fused op's against a dropout op on the unfused probabilities) all of
// it holds too.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/random_values.h"
#include "tessel/autodiff/backward.h"
#include "tessel/kernels/attention_gemm.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

struct Sizes {
  int64_t batch, seq, kseq, heads, head;
  bool causal;
  float dropout = 0.0f;  // on the probabilities: the fused op's, or a dropout op's
};

struct Built {
  Graph graph;
  ValueId out = -1, loss = -1;
  std::vector<ValueId> grads;  // q, k, v
};

// loss = sum(out * R); q, k, v are parameters so their gradients are outputs.
Built build(const Sizes& s, bool fused) {
  Built r;
  GraphBuilder b(r.graph);
  const Dim batch{"batch", s.batch}, seq{"seq", s.seq}, kseq{"kseq", s.kseq},
      heads{"heads", s.heads}, head{"head", s.head};
  const ValueId q = b.param("q", Shape{batch, seq, heads, head});
  const ValueId k = b.param("k", Shape{batch, kseq, heads, head});
  const ValueId v = b.param("v", Shape{batch, kseq, heads, head});
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head));
  const ProbabilityDropout drop{s.dropout, 7, "probs_dropout"};
  if (fused) {
    r.out = b.attention(q, k, v, "seq", "kseq", "head", s.causal, scale, "attention", drop).out;
  } else {
    const ValueId scores = b.einsum(q, k, {"batch", "heads", "seq", "kseq"}, "scores");
    ValueId probs = b.softmax(scores, "kseq", scale, s.causal ? "seq" : "", "probs");
    if (s.dropout > 0) probs = b.dropout(probs, drop.p, drop.seed, drop.key);
    r.out = b.einsum(probs, v, {"batch", "seq", "heads", "head"}, "mix");
  }
  const Shape out_shape = r.graph.node(r.out).shape;
  const ValueId weights = b.input("weights", out_shape);
  r.loss = b.reduce_sum(b.mul(r.out, weights), out_shape.names(), "loss");
  auto grads = build_backward(b, r.loss, r.graph.params());
  for (ValueId p : r.graph.params()) r.grads.push_back(grads.at(p));
  return r;
}

using Values = std::map<std::string, std::vector<float>>;

// Every output's values after one run.
std::vector<std::vector<float>> run(Built& m, const Sizes& s, bool bf16 = false, int64_t step = 0) {
  std::vector<ValueId> outputs = {m.out, m.loss};
  outputs.insert(outputs.end(), m.grads.begin(), m.grads.end());
  Program p(m.graph, outputs, CompileOptions{.bf16 = bf16});
  p.set_step(step);
  Values params;
  uint32_t seed = 1;
  for (ValueId id : m.graph.params()) {
    const Node& n = m.graph.node(id);
    params[n.name] = random_values(n.shape.numel(), seed++);
  }
  for (auto& [name, values] : params) p.bind_param(name, values.data());
  const std::vector<float> w = random_values(s.batch * s.seq * s.heads * s.head, 99);
  p.write_input("weights", w.data(), w.size() * sizeof(float));
  p.run();
  std::vector<std::vector<float>> result;
  for (ValueId v : outputs) result.push_back(p.read_f32(v));
  return result;
}

// max |a - b| over max |b|.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

const char* kNames[] = {"output", "loss", "dq", "dk", "dv"};

class FusedAttention : public ::testing::TestWithParam<Sizes> {};

TEST_P(FusedAttention, MatchesUnfusedInF32) {
  const Sizes s = GetParam();
  Built fused = build(s, true), unfused = build(s, false);
  const auto a = run(fused, s), b = run(unfused, s);
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size());
    const double err = relative_error(a[i], b[i]);
    EXPECT_LE(err, 1e-6) << kNames[i] << ": relative error " << err;
  }
}

// In f32 and in bf16 (on this CPU's bf16 products, and on the f32 block GEMM).
TEST_P(FusedAttention, BitwiseRunToRunAndAcrossThreadCounts) {
  const Sizes s = GetParam();
  Built fused = build(s, true);
  const int saved = omp_get_max_threads();
  for (const auto& [bf16, dot] : {std::pair{false, true}, {true, true}, {true, false}}) {
    SCOPED_TRACE(std::string(bf16 ? "bf16" : "f32") + (dot ? "" : ", f32 products"));
    kernels::attention_gemm::set_attention_bf16_dot(dot);
    omp_set_num_threads(1);
    const auto one = run(fused, s, bf16);
    omp_set_num_threads(3);
    const auto three = run(fused, s, bf16);
    const auto again = run(fused, s, bf16);
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(one[i], three[i]) << kNames[i] << " differs between 1 and 3 threads";
      EXPECT_EQ(three[i], again[i]) << kNames[i] << " differs between two runs";
    }
  }
  kernels::attention_gemm::set_attention_bf16_dot(true);
  omp_set_num_threads(saved);
}

// bf16 operands, f32 statistics: close to the unfused bf16 program (which
// rounds the same operands in its einsums), and to f32 at bf16's precision.
TEST_P(FusedAttention, Bf16PathIsCloseToUnfusedBf16) {
  const Sizes s = GetParam();
  Built fused = build(s, true), unfused = build(s, false);
  const auto a = run(fused, s, true), b = run(unfused, s, true), exact = run(unfused, s);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(relative_error(a[i], b[i]), 2e-2) << kNames[i] << " vs unfused bf16";
    EXPECT_LE(relative_error(a[i], exact[i]), 2e-2) << kNames[i] << " vs f32";
    EXPECT_GT(relative_error(a[i], exact[i]), 0) << kNames[i] << ": bf16 rounded nothing";
  }
}

// A bf16 program's products on bf16 dot instructions (AVX512-BF16) against
// the f32 block GEMM on the same rounded operands: only the order of each
// sum (pairs of products) and denormals differ.
TEST_P(FusedAttention, Bf16DotProductsMatchF32ProductsOfTheSameOperands) {
  if (!kernels::attention_gemm::bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const Sizes s = GetParam();
  Built fused = build(s, true);
  const auto dot = run(fused, s, true);
  kernels::attention_gemm::set_attention_bf16_dot(false);
  const auto f32_products = run(fused, s, true);
  kernels::attention_gemm::set_attention_bf16_dot(true);
  for (size_t i = 0; i < dot.size(); ++i)
    EXPECT_LE(relative_error(dot[i], f32_products[i]), 1e-5) << kNames[i];
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, FusedAttention,
    ::testing::Values(Sizes{2, 150, 150, 3, 24, true}, Sizes{1, 64, 64, 2, 64, true},
                      Sizes{2, 70, 131, 2, 16, false}, Sizes{1, 5, 5, 1, 128, true},
                      Sizes{2, 150, 150, 3, 24, true, 0.1f}, Sizes{2, 70, 131, 2, 16, false, 0.3f}),
    [](const auto& info) {
      const Sizes& s = info.param;
      return std::string(s.causal ? "causal_" : "full_") + std::to_string(s.seq) + "x" +
             std::to_string(s.kseq) + "_d" + std::to_string(s.head) +
             (s.dropout > 0 ? "_dropout" + std::to_string(static_cast<int>(s.dropout * 10)) : "");
    });

// Dropout on the probabilities: the mask is the dropout op's on the stored
// probabilities, so fused and unfused stay within 1e-6 (the cases above
// with dropout); it changes the results, and a new step draws a new mask.
TEST(FusedAttentionDropout, DrawsTheMaskOfTheStepAndChangesTheResult) {
  for (const Sizes& s :
       {Sizes{2, 150, 150, 3, 24, true, 0.1f}, Sizes{2, 70, 131, 2, 16, false, 0.3f}}) {
    SCOPED_TRACE("dropout " + std::to_string(s.dropout));
    Sizes none = s;
    none.dropout = 0;
    Built fused = build(s, true), plain = build(none, true), unfused = build(s, false);
    const auto step0 = run(fused, s), step1 = run(fused, s, false, 1), without = run(plain, s);
    const auto unfused1 = run(unfused, s, false, 1);
    for (size_t i = 0; i < step0.size(); ++i) {
      EXPECT_GT(relative_error(step0[i], without[i]), 1e-3)
          << kNames[i] << ": dropout changed nothing";
      EXPECT_GT(relative_error(step0[i], step1[i]), 1e-3)
          << kNames[i] << ": step 1 drew step 0's mask";
      EXPECT_LE(relative_error(step1[i], unfused1[i]), 1e-6) << kNames[i] << " at step 1";
    }
  }
}

}  // namespace
}  // namespace tessel
