// GraphBuilder: the model-writing API over a Graph.
//
// Each method adds one node and returns its value; shapes are checked as the
// model is built (the op table's rules), so a wrong dim name or size fails
// here, naming the op, its label and the dims. A label prefix (`scope`) names
// nodes and parameters hierarchically ("block0.attn.wq").
#pragma once

#include <string>
#include <vector>

#include "tessel/base/rotary_frequencies.h"
#include "tessel/ir/graph.h"

namespace tessel {

// Dropout on attention's probabilities (GraphBuilder::attention): the rate
// (0: none), the seed and the random stream's name.
struct ProbabilityDropout {
  float p = 0.0f;
  uint64_t seed = 0;
  std::string key;
};

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& graph) : graph_(graph) {}

  Graph& graph() { return graph_; }
  // The reference is invalidated by the next node added.
  const Shape& shape(ValueId v) const { return graph_.node(v).shape; }

  // Labels of nodes added while a Scope is alive get "<prefix>." in front.
  class Scope {
   public:
    Scope(GraphBuilder& builder, const std::string& name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    GraphBuilder& builder_;
    size_t saved_length_;
  };
  std::string label(const std::string& name) const { return prefix_ + name; }

  ValueId input(const std::string& name, Shape shape, DType dtype = DType::kF32);
  ValueId param(const std::string& name, Shape shape, ParamInit init = {});
  ValueId fill(Shape shape, float value);

  // Contracts every dim present in both operands but absent from `out_dims`.
  ValueId einsum(ValueId a, ValueId b, std::vector<std::string> out_dims,
                 const std::string& name = "einsum");
  ValueId add(ValueId a, ValueId b, const std::string& name = "add");
  ValueId sub(ValueId a, ValueId b, const std::string& name = "sub");
  ValueId mul(ValueId a, ValueId b, const std::string& name = "mul");
  ValueId div(ValueId a, ValueId b, const std::string& name = "div");
  ValueId scale(ValueId x, float alpha, const std::string& name = "scale");
  ValueId gelu(ValueId x, const std::string& name = "gelu");
  ValueId relu(ValueId x, const std::string& name = "relu");
  ValueId exp(ValueId x, const std::string& name = "exp");
  ValueId log(ValueId x, const std::string& name = "log");
  ValueId tanh(ValueId x, const std::string& name = "tanh");
  ValueId bias_gelu(ValueId x, ValueId bias, const std::string& name = "bias_gelu");
  // Masks are keyed by (seed, key, step, global row along `row_dim`, element)
  // when x has that dim (attrs.dim; backend/cpu/dropout_op.h), else by element.
  ValueId dropout(ValueId x, float p, uint64_t seed, const std::string& key,
                  const std::string& row_dim = "batch");

  ValueId reduce_sum(ValueId x, std::vector<std::string> dims, const std::string& name = "sum");
  ValueId reduce_mean(ValueId x, std::vector<std::string> dims, const std::string& name = "mean");
  ValueId reduce_max(ValueId x, std::vector<std::string> dims, const std::string& name = "max");
  ValueId expand(ValueId x, Shape target, const std::string& name = "expand");

  // Softmax of scale*x over `dim`; with `causal_query_dim`, key positions
  // after the query position are masked out.
  ValueId softmax(ValueId x, const std::string& dim, float scale = 1.0f,
                  const std::string& causal_query_dim = "", const std::string& name = "softmax");
  ValueId layernorm(ValueId x, ValueId gamma, ValueId beta, const std::string& dim,
                    float eps = 1e-5f, const std::string& name = "layernorm");
  ValueId embedding(ValueId table, ValueId ids, const std::string& vocab_dim,
                    const std::string& name = "embedding");
  ValueId cross_entropy(ValueId logits, ValueId labels, const std::string& vocab_dim,
                        const std::string& name = "cross_entropy");
  // cross_entropy(einsum(h, w over `embed_dim`), labels) as one op that never
  // stores the logits (w holds vocab_dim and embed_dim in either order, h
  // ends with embed_dim):
  // the forward keeps the per-row log-sum-exp, the backward recomputes the
  // logits tile by tile (kernels/linear_cross_entropy.h). Returns the loss.
  ValueId linear_cross_entropy(ValueId h, ValueId w, ValueId labels, const std::string& vocab_dim,
                               const std::string& embed_dim,
                               const std::string& name = "linear_cross_entropy");

  // The Llama family's ops. rmsnorm: x / sqrt(mean(x^2 over dim) + eps) * gamma.
  // rotary: each adjacent pair (2i, 2i+1) of `dim` (the last dim, even size)
  // turned by the angle p * theta^(-2i / size(dim)), p the index along
  // `position_dim` (Meta's Llama convention: pairs interleaved, not halves),
  // the frequencies rescaled as Llama 3.1 when `scaling` is enabled.
  ValueId silu(ValueId x, const std::string& name = "silu");
  ValueId sigmoid(ValueId x, const std::string& name = "sigmoid");
  ValueId sqrt(ValueId x, const std::string& name = "sqrt");
  ValueId rsqrt(ValueId x, const std::string& name = "rsqrt");
  ValueId rmsnorm(ValueId x, ValueId gamma, const std::string& dim, float eps = 1e-5f,
                  const std::string& name = "rmsnorm");
  ValueId rotary(ValueId x, const std::string& dim, const std::string& position_dim,
                 float theta = 10000.0f, const RotaryScaling& scaling = {},
                 const std::string& name = "rotary");
  // Element `index` of a tuple (ir/tuple.h): a view, no data moves.
  ValueId tuple_get(ValueId tuple, int index, const std::string& name = "get");
  // Fused attention, softmax(scale * q.k over `head`) . v over the key dim,
  // masked causally if asked: q has `query` and `head`, k and v are q with
  // `query` renamed `key`. Returns its output (q's shape) and the per-row
  // log-sum-exp of the scaled logits (q without `head`), all the backward
  // keeps: it recomputes the probabilities block by block.
  // With `dropout` (rate p > 0), the probabilities are dropped out before
  // they weigh v: the mask dropout(probs, p, seed, key) draws on the
  // probabilities laid out as attention_probabilities_shape (ir/attrs.h),
  // row dim `batch`, so the unfused sequence with that dropout is the same
  // function.
  struct Attention {
    ValueId tuple, out, lse;
  };
  Attention attention(ValueId q, ValueId k, ValueId v, const std::string& query,
                      const std::string& key, const std::string& head, bool causal, float scale,
                      const std::string& name = "attention",
                      const ProbabilityDropout& dropout = {});

  ValueId split_dim(ValueId x, const std::string& dim, Shape parts,
                    const std::string& name = "split");
  ValueId merge_dims(ValueId x, std::vector<std::string> dims, const std::string& merged,
                     const std::string& name = "merge");
  ValueId rename(ValueId x, const std::string& from, const std::string& to,
                 const std::string& name = "rename");

  // Any node, for passes (autodiff) that emit gradient ops.
  ValueId op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs, const std::string& name);

 private:
  Graph& graph_;
  std::string prefix_;
};

}  // namespace tessel
