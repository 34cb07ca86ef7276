// The op harness: every op of the op table goes through it.
//
// Each case builds a small graph ending in the op, adds loss = sum(out * R)
// for fixed random weights R and differentiates it. Then:
//   1. fast kernels vs their `_ref` twins on the whole forward + backward
//      graph (so gradient ops are compared too);
//   2. the analytic gradient of every parameter against central finite
//      differences of the loss (reference kernels, double-accumulated).
// A test at the bottom checks that every differentiable OpKind has a case.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include "tessel/autodiff/backward.h"
#include "tessel/base/philox.h"
#include "tessel/ir/builder.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

struct OpCase {
  std::string name;
  std::function<ValueId(GraphBuilder&)> build;
  std::map<std::string, int32_t> int_ranges;  // i32 input name -> values in [0, range)
  std::set<std::string> positive;             // params that must stay positive
};

struct Harness {
  Graph graph;
  ValueId out = -1, loss = -1;
  std::vector<ValueId> grads;
  std::map<std::string, std::vector<float>> param_values;
  std::map<std::string, std::vector<int32_t>> int_inputs;
  std::vector<float> weights;
};

Harness make_harness(const OpCase& c) {
  Harness h;
  GraphBuilder b(h.graph);
  h.out = c.build(b);
  const Shape out_shape = h.graph.node(h.out).shape;
  ValueId r = b.input("harness.weights", out_shape);
  ValueId weighted = b.mul(h.out, r, "harness.weighted");
  h.loss =
      out_shape.rank() == 0 ? weighted : b.reduce_sum(weighted, out_shape.names(), "harness.loss");
  auto grads = build_backward(b, h.loss, h.graph.params());
  for (ValueId p : h.graph.params()) h.grads.push_back(grads.at(p));

  for (ValueId p : h.graph.params()) {
    const Node& n = h.graph.node(p);
    PhiloxStream s(7, n.name);
    std::vector<float> v(n.shape.numel());
    for (size_t i = 0; i < v.size(); ++i) {
      // Magnitudes in [0.1, 1]: away from kinks (relu) and poles (div).
      float mag = 0.1f + 0.9f * s.uniform(i, 0);
      bool negative = !c.positive.count(n.name) && s.uniform(i, 1) < 0.5f;
      v[i] = negative ? -mag : mag;
    }
    h.param_values[n.name] = std::move(v);
  }
  for (ValueId id : h.graph.inputs()) {
    const Node& n = h.graph.node(id);
    PhiloxStream s(11, n.name);
    if (n.dtype == DType::kI32) {
      auto it = c.int_ranges.find(n.name);
      EXPECT_NE(it, c.int_ranges.end()) << "case " << c.name << ": no range for input " << n.name;
      std::vector<int32_t> v(n.shape.numel());
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(s.below(it->second, i));
      h.int_inputs[n.name] = std::move(v);
    } else {
      h.weights.resize(n.shape.numel());
      for (size_t i = 0; i < h.weights.size(); ++i) h.weights[i] = 2 * s.uniform(i) - 1;
    }
  }
  return h;
}

void feed(Harness& h, Program& p, std::map<std::string, std::vector<float>>& params) {
  for (auto& [name, values] : params) p.bind_param(name, values.data());
  for (auto& [name, values] : h.int_inputs)
    std::memcpy(p.input(name), values.data(), values.size() * sizeof(int32_t));
  std::memcpy(p.input("harness.weights"), h.weights.data(), h.weights.size() * sizeof(float));
}

bool close(double a, double b, double rtol, double atol) {
  return std::abs(a - b) <= atol + rtol * std::max(std::abs(a), std::abs(b));
}

std::vector<OpCase> all_cases() {
  auto p = [](GraphBuilder& b, const std::string& name, Shape s) { return b.param(name, s); };
  const Dim i{"i", 3}, j{"j", 4}, k{"k", 5};
  std::vector<OpCase> cases;
  cases.push_back({"einsum_matmul", [=](GraphBuilder& b) {
                     return b.einsum(p(b, "a", Shape{i, k}), p(b, "b", Shape{k, j}), {"i", "j"});
                   }});
  cases.push_back(
      {"einsum_batched_transposed", [=](GraphBuilder& b) {
         Dim n{"n", 2};
         return b.einsum(p(b, "a", Shape{n, k, i}), p(b, "b", Shape{n, j, k}), {"n", "i", "j"});
       }});
  cases.push_back(
      {"einsum_attention_layout", [=](GraphBuilder& b) {
         Dim batch{"batch", 2}, seq{"seq", 5}, heads{"heads", 3}, head{"head", 4}, kseq{"kseq", 5};
         ValueId q = p(b, "q", Shape{batch, seq, heads, head});
         ValueId kk = p(b, "k", Shape{batch, kseq, heads, head});
         return b.einsum(q, kk, {"batch", "heads", "seq", "kseq"});
       }});
  cases.push_back(
      {"einsum_needs_permute", [=](GraphBuilder& b) {
         Dim x{"x", 3}, y{"y", 2}, z{"z", 4};
         return b.einsum(p(b, "a", Shape{x, k, y}), p(b, "b", Shape{k, z}), {"x", "z", "y"});
       }});
  cases.push_back({"einsum_outer_product", [=](GraphBuilder& b) {
                     return b.einsum(p(b, "a", Shape{i}), p(b, "b", Shape{j}), {"i", "j"});
                   }});
  cases.push_back(
      {"einsum_multi_contract", [=](GraphBuilder& b) {
         Dim h{"h", 2}, d{"d", 3};
         return b.einsum(p(b, "a", Shape{i, h, d}), p(b, "b", Shape{h, d, j}), {"i", "j"});
       }});
  cases.push_back({"add_same", [=](GraphBuilder& b) {
                     return b.add(p(b, "a", Shape{i, j}), p(b, "b", Shape{i, j}));
                   }});
  cases.push_back({"add_bias", [=](GraphBuilder& b) {
                     return b.add(p(b, "a", Shape{i, j, k}), p(b, "b", Shape{k}));
                   }});
  cases.push_back({"add_transposed", [=](GraphBuilder& b) {
                     return b.add(p(b, "a", Shape{i, j}), p(b, "b", Shape{j, i}));
                   }});
  cases.push_back({"sub_broadcast_lhs", [=](GraphBuilder& b) {
                     return b.sub(p(b, "a", Shape{j}), p(b, "b", Shape{i, j}));
                   }});
  cases.push_back({"mul_broadcast_middle", [=](GraphBuilder& b) {
                     return b.mul(p(b, "a", Shape{i, j, k}), p(b, "b", Shape{i, k}));
                   }});
  cases.push_back({"div_broadcast", [=](GraphBuilder& b) {
                     return b.div(p(b, "a", Shape{i, j}), p(b, "b", Shape{j}));
                   }});
  cases.push_back({"scale", [=](GraphBuilder& b) {
                     return b.scale(p(b, "a", Shape{i, j}), -1.7f);
                   }});
  cases.push_back({"gelu", [=](GraphBuilder& b) { return b.gelu(p(b, "a", Shape{i, j, k})); }});
  cases.push_back({"relu", [=](GraphBuilder& b) { return b.relu(p(b, "a", Shape{i, j, k})); }});
  cases.push_back({"exp", [=](GraphBuilder& b) { return b.exp(p(b, "a", Shape{i, j})); }});
  cases.push_back({"log",
                   [=](GraphBuilder& b) {
                     return b.log(p(b, "a", Shape{i, j}));
                   },
                   {},
                   {"a"}});
  cases.push_back({"tanh", [=](GraphBuilder& b) { return b.tanh(p(b, "a", Shape{i, j})); }});
  cases.push_back({"bias_gelu", [=](GraphBuilder& b) {
                     return b.bias_gelu(p(b, "a", Shape{i, j, k}), p(b, "b", Shape{k}));
                   }});
  cases.push_back({"dropout", [=](GraphBuilder& b) {
                     return b.dropout(p(b, "a", Shape{i, j, k}), 0.3f, 5, "drop");
                   }});
  cases.push_back({"reduce_sum_middle", [=](GraphBuilder& b) {
                     return b.reduce_sum(p(b, "a", Shape{i, j, k}), {"j"});
                   }});
  cases.push_back({"reduce_sum_leading_two", [=](GraphBuilder& b) {
                     return b.reduce_sum(p(b, "a", Shape{i, j, k}), {"i", "j"});
                   }});
  cases.push_back({"reduce_mean_last", [=](GraphBuilder& b) {
                     return b.reduce_mean(p(b, "a", Shape{i, j, k}), {"k"});
                   }});
  cases.push_back({"reduce_max", [=](GraphBuilder& b) {
                     return b.reduce_max(p(b, "a", Shape{i, j, k}), {"j"});
                   }});
  cases.push_back({"expand", [=](GraphBuilder& b) {
                     return b.expand(p(b, "a", Shape{j}), Shape{i, j, k});
                   }});
  cases.push_back({"softmax_last", [=](GraphBuilder& b) {
                     return b.softmax(p(b, "a", Shape{i, k}), "k", 1.5f);
                   }});
  cases.push_back({"softmax_middle", [=](GraphBuilder& b) {
                     return b.softmax(p(b, "a", Shape{i, k, j}), "k");
                   }});
  cases.push_back({"softmax_causal", [=](GraphBuilder& b) {
                     Dim n{"n", 2}, seq{"seq", 5}, kseq{"kseq", 5};
                     return b.softmax(p(b, "a", Shape{n, seq, kseq}), "kseq", 0.5f, "seq");
                   }});
  cases.push_back({"layernorm", [=](GraphBuilder& b) {
                     return b.layernorm(p(b, "x", Shape{i, j, k}), p(b, "g", Shape{k}),
                                        p(b, "b", Shape{k}), "k");
                   }});
  cases.push_back({"embedding",
                   [=](GraphBuilder& b) {
                     ValueId table = p(b, "table", Shape{{"vocab", 7}, k});
                     ValueId ids = b.input("ids", Shape{i, j}, DType::kI32);
                     return b.embedding(table, ids, "vocab");
                   },
                   {{"ids", 7}}});
  cases.push_back({"cross_entropy",
                   [=](GraphBuilder& b) {
                     ValueId logits = p(b, "logits", Shape{i, j, {"vocab", 6}});
                     ValueId labels = b.input("labels", Shape{i, j}, DType::kI32);
                     return b.cross_entropy(logits, labels, "vocab");
                   },
                   {{"labels", 6}}});
  cases.push_back(
      {"split_dim", [=](GraphBuilder& b) {
         Dim e{"e", 6};
         ValueId x = b.split_dim(p(b, "a", Shape{i, e}), "e", Shape{{"h", 2}, {"d", 3}});
         return b.mul(x, p(b, "w", Shape{{"h", 2}, {"d", 3}}));
       }});
  cases.push_back(
      {"merge_dims", [=](GraphBuilder& b) {
         ValueId x = b.merge_dims(p(b, "a", Shape{i, {"h", 2}, {"d", 3}}), {"h", "d"}, "e");
         return b.mul(x, p(b, "w", Shape{{"e", 6}}));
       }});
  cases.push_back({"rename", [=](GraphBuilder& b) {
                     ValueId x = b.rename(p(b, "a", Shape{i, j}), "j", "jj");
                     return b.mul(x, p(b, "w", Shape{{"jj", 4}}));
                   }});
  return cases;
}

class OpHarness : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpHarness, FastMatchesReference) {
  const OpCase& c = GetParam();
  Harness h = make_harness(c);
  std::vector<ValueId> outputs = {h.out, h.loss};
  outputs.insert(outputs.end(), h.grads.begin(), h.grads.end());
  Program fast(h.graph, outputs);
  Program ref(h.graph, outputs, CompileOptions{.reference_kernels = true});
  auto params_fast = h.param_values, params_ref = h.param_values;
  feed(h, fast, params_fast);
  feed(h, ref, params_ref);
  fast.run();
  ref.run();
  for (ValueId v : outputs) {
    const int64_t n = h.graph.node(v).shape.numel();
    const float* a = fast.f32(v);
    const float* b = ref.f32(v);
    for (int64_t e = 0; e < n; ++e)
      ASSERT_TRUE(close(a[e], b[e], 1e-5, 1e-6))
          << c.name << ": value %" << v << " (" << h.graph.node(v).name << ") element " << e
          << ": fast " << a[e] << " vs reference " << b[e];
  }
}

TEST_P(OpHarness, GradientMatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  Harness h = make_harness(c);
  std::vector<ValueId> outputs = {h.loss};
  outputs.insert(outputs.end(), h.grads.begin(), h.grads.end());
  Program program(h.graph, outputs, CompileOptions{.reference_kernels = true});
  auto params = h.param_values;
  feed(h, program, params);
  program.run();
  const auto& param_ids = h.graph.params();
  for (size_t pi = 0; pi < param_ids.size(); ++pi) {
    const std::string& name = h.graph.node(param_ids[pi]).name;
    std::vector<float>& values = params[name];
    std::vector<float> analytic(program.f32(h.grads[pi]), program.f32(h.grads[pi]) + values.size());
    // Up to 8 elements per parameter, spread over it.
    const size_t count = values.size();
    const size_t stride = std::max<size_t>(1, count / 8);
    for (size_t e = 0; e < count; e += stride) {
      const float h_step = 1e-3f;
      const float saved = values[e];
      values[e] = saved + h_step;
      program.run();
      double plus = *program.f32(h.loss);
      values[e] = saved - h_step;
      program.run();
      double minus = *program.f32(h.loss);
      values[e] = saved;
      double numeric = (plus - minus) / (2.0 * h_step);
      EXPECT_TRUE(close(analytic[e], numeric, 2e-2, 2e-3))
          << c.name << ": d loss / d " << name << "[" << e << "]: analytic " << analytic[e]
          << " vs finite difference " << numeric;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpHarness, ::testing::ValuesIn(all_cases()),
                         [](const auto& info) { return info.param.name; });

// Every forward op with a gradient rule has a harness case.
TEST(OpHarnessCoverage, EveryDifferentiableOpHasACase) {
  std::set<OpKind> covered;
  for (const OpCase& c : all_cases()) {
    Harness h = make_harness(c);
    for (const Node& n : h.graph.nodes()) covered.insert(n.kind);
  }
  // Collectives exist only on sharded local graphs; the mpirun tests cover them.
  for (int k = 0; k < static_cast<int>(OpKind::kShardSlice); ++k) {
    OpKind kind = static_cast<OpKind>(k);
    EXPECT_TRUE(covered.count(kind)) << op_name(kind) << " is not exercised by the op harness";
  }
}

}  // namespace
}  // namespace tessel
