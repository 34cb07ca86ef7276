#include "common/op_cases.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tessel/autodiff/backward.h"
#include "tessel/base/philox.h"

namespace tessel {

std::vector<OpCase> op_cases(const OpCaseSizes& s) {
  auto p = [](GraphBuilder& b, const std::string& name, Shape shape) {
    return b.param(name, shape);
  };
  const Dim i{"i", s.i}, j{"j", s.j}, k{"k", s.k};
  std::vector<OpCase> cases;
  cases.push_back({"einsum_matmul", [=](GraphBuilder& b) {
                     return b.einsum(p(b, "a", Shape{i, k}), p(b, "b", Shape{k, j}), {"i", "j"});
                   }});
  cases.push_back(
      {"einsum_batched_transposed", [=](GraphBuilder& b) {
         Dim n{"n", s.n};
         return b.einsum(p(b, "a", Shape{n, k, i}), p(b, "b", Shape{n, j, k}), {"n", "i", "j"});
       }});
  cases.push_back({"einsum_attention_layout", [=](GraphBuilder& b) {
                     Dim batch{"batch", s.n}, seq{"seq", s.seq}, heads{"heads", s.heads},
                         head{"head", s.head}, kseq{"kseq", s.seq};
                     ValueId q = p(b, "q", Shape{batch, seq, heads, head});
                     ValueId kk = p(b, "k", Shape{batch, kseq, heads, head});
                     return b.einsum(q, kk, {"batch", "heads", "seq", "kseq"});
                   }});
  cases.push_back(
      {"einsum_needs_permute", [=](GraphBuilder& b) {
         Dim x{"x", s.x}, y{"y", s.y}, z{"z", s.z};
         return b.einsum(p(b, "a", Shape{x, k, y}), p(b, "b", Shape{k, z}), {"x", "z", "y"});
       }});
  cases.push_back({"einsum_outer_product", [=](GraphBuilder& b) {
                     return b.einsum(p(b, "a", Shape{i}), p(b, "b", Shape{j}), {"i", "j"});
                   }});
  cases.push_back(
      {"einsum_multi_contract", [=](GraphBuilder& b) {
         Dim h{"h", s.h}, d{"d", s.d};
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
                     Dim n{"n", s.n}, seq{"seq", s.seq}, kseq{"kseq", s.seq};
                     return b.softmax(p(b, "a", Shape{n, seq, kseq}), "kseq", 0.5f, "seq");
                   }});
  cases.push_back({"layernorm", [=](GraphBuilder& b) {
                     return b.layernorm(p(b, "x", Shape{i, j, k}), p(b, "g", Shape{k}),
                                        p(b, "b", Shape{k}), "k");
                   }});
  cases.push_back({"embedding",
                   [=](GraphBuilder& b) {
                     ValueId table = p(b, "table", Shape{{"vocab", s.table_vocab}, k});
                     ValueId ids = b.input("ids", Shape{i, j}, DType::kI32);
                     return b.embedding(table, ids, "vocab");
                   },
                   {{"ids", static_cast<int32_t>(s.table_vocab)}}});
  cases.push_back({"cross_entropy",
                   [=](GraphBuilder& b) {
                     ValueId logits = p(b, "logits", Shape{i, j, {"vocab", s.logits_vocab}});
                     ValueId labels = b.input("labels", Shape{i, j}, DType::kI32);
                     return b.cross_entropy(logits, labels, "vocab");
                   },
                   {{"labels", static_cast<int32_t>(s.logits_vocab)}}});
  // The LM head and loss fused (the weight as the GPT's, vocab first, and
  // as the Llama's, embed first): the same function as einsum then
  // cross_entropy.
  for (bool vocab_first : {true, false})
    cases.push_back({vocab_first ? "linear_cross_entropy" : "linear_cross_entropy_embed_first",
                     [=](GraphBuilder& b) {
                       const Dim vocab{"vocab", s.logits_vocab};
                       ValueId h = p(b, "h", Shape{i, j, k});
                       ValueId w = p(b, "w", vocab_first ? Shape{vocab, k} : Shape{k, vocab});
                       ValueId labels = b.input("labels", Shape{i, j}, DType::kI32);
                       return b.linear_cross_entropy(h, w, labels, "vocab", "k");
                     },
                     {{"labels", static_cast<int32_t>(s.logits_vocab)}}});
  // The Llama family's ops.
  cases.push_back({"silu", [=](GraphBuilder& b) { return b.silu(p(b, "a", Shape{i, j, k})); }});
  cases.push_back({"sigmoid", [=](GraphBuilder& b) { return b.sigmoid(p(b, "a", Shape{i, j})); }});
  cases.push_back({"sqrt",
                   [=](GraphBuilder& b) {
                     return b.sqrt(p(b, "a", Shape{i, j}));
                   },
                   {},
                   {"a"}});
  cases.push_back({"rsqrt",
                   [=](GraphBuilder& b) {
                     return b.rsqrt(p(b, "a", Shape{i, j}));
                   },
                   {},
                   {"a"}});
  cases.push_back({"rmsnorm", [=](GraphBuilder& b) {
                     return b.rmsnorm(p(b, "x", Shape{i, j, k}), p(b, "g", Shape{k}), "k");
                   }});
  cases.push_back(
      {"rotary", [=](GraphBuilder& b) {
         Dim n{"n", s.n}, seq{"seq", s.seq}, heads{"heads", s.heads}, head{"head", s.head};
         // theta 3: angles of several radians at these few positions
         return b.rotary(p(b, "a", Shape{n, seq, heads, head}), "head", "seq", 3.0f);
       }});
  cases.push_back({"rotary_llama31_scaled", [=](GraphBuilder& b) {
                     Dim seq{"seq", s.seq}, n{"n", s.n}, head{"head", s.head};
                     // Context 20: every wavelength here (6-15) is in the blended band.
                     return b.rotary(p(b, "a", Shape{seq, n, head}), "head", "seq", 3.0f,
                                     RotaryScaling{4, 1, 4, 20});
                   }});
  cases.push_back(
      {"split_dim", [=](GraphBuilder& b) {
         Dim e{"e", s.h * s.d};
         ValueId x = b.split_dim(p(b, "a", Shape{i, e}), "e", Shape{{"h", s.h}, {"d", s.d}});
         return b.mul(x, p(b, "w", Shape{{"h", s.h}, {"d", s.d}}));
       }});
  cases.push_back(
      {"merge_dims", [=](GraphBuilder& b) {
         ValueId x = b.merge_dims(p(b, "a", Shape{i, {"h", s.h}, {"d", s.d}}), {"h", "d"}, "e");
         return b.mul(x, p(b, "w", Shape{{"e", s.h * s.d}}));
       }});
  cases.push_back({"rename", [=](GraphBuilder& b) {
                     ValueId x = b.rename(p(b, "a", Shape{i, j}), "j", "jj");
                     return b.mul(x, p(b, "w", Shape{{"jj", s.j}}));
                   }});
  // Fused attention (a tuple and its tuple_get views): causal, and not with
  // more keys than queries and the head dim inside (strided gathers; with
  // the shardable sizes, 12 keys: ring attention's 2n halves on 2 ranks).
  cases.push_back({"attention_causal", [=](GraphBuilder& b) {
                     Dim n{"n", s.n}, seq{"seq", s.seq}, kseq{"kseq", s.seq},
                         heads{"heads", s.heads}, head{"head", s.head};
                     ValueId q = p(b, "q", Shape{n, seq, heads, head});
                     ValueId kk = p(b, "k", Shape{n, kseq, heads, head});
                     ValueId v = p(b, "v", Shape{n, kseq, heads, head});
                     return b.attention(q, kk, v, "seq", "kseq", "head", true, 0.7f).out;
                   }});
  cases.push_back({"attention_head_inner", [=](GraphBuilder& b) {
                     Dim n{"n", s.n}, seq{"seq", s.seq}, kseq{"kseq", s.seq + 4},
                         heads{"heads", s.heads}, head{"head", s.head};
                     ValueId q = p(b, "q", Shape{heads, head, n, seq});
                     ValueId kk = p(b, "k", Shape{heads, head, n, kseq});
                     ValueId v = p(b, "v", Shape{heads, head, n, kseq});
                     return b.attention(q, kk, v, "seq", "kseq", "head", false, 0.4f).out;
                   }});
  // Dropout on the probabilities (the mask keyed by global batch row, head,
  // query and key: the sharded twin splits each of them).
  cases.push_back({"attention_dropout", [=](GraphBuilder& b) {
                     Dim batch{"batch", s.n}, seq{"seq", s.seq}, kseq{"kseq", s.seq},
                         heads{"heads", s.heads}, head{"head", s.head};
                     ValueId q = p(b, "q", Shape{batch, seq, heads, head});
                     ValueId kk = p(b, "k", Shape{batch, kseq, heads, head});
                     ValueId v = p(b, "v", Shape{batch, kseq, heads, head});
                     return b
                         .attention(q, kk, v, "seq", "kseq", "head", true, 0.7f, "attention",
                                    {0.3f, 5, "probs_dropout"})
                         .out;
                   }});
  return cases;
}

std::vector<OpCase> shardable_op_cases() {
  OpCaseSizes s;
  s.i = 4, s.j = 8, s.k = 12;
  s.n = 4;
  s.seq = 8;
  s.heads = 4, s.head = 8;
  s.x = 4, s.y = 8, s.z = 12;
  s.h = 4, s.d = 8;
  s.table_vocab = 8;
  s.logits_vocab = 12;
  std::vector<OpCase> cases = op_cases(s);
  for (OpCase& c : cases) c.name += "_x4";
  return cases;
}

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

void feed_harness(Harness& h, Program& p, std::map<std::string, std::vector<float>>& params) {
  for (auto& [name, values] : params) p.bind_param(name, values.data());
  for (auto& [name, values] : h.int_inputs)
    p.write_input(name, values.data(), values.size() * sizeof(int32_t));
  p.write_input("harness.weights", h.weights.data(), h.weights.size() * sizeof(float));
}

}  // namespace tessel
