#include "tessel/ir/builder.h"

#include "tessel/ir/attrs.h"

namespace tessel {
namespace {

Attrs dims_attrs(std::vector<std::string> dims) {
  Attrs a;
  a.dims = std::move(dims);
  return a;
}

Attrs dim_attrs(const std::string& dim) {
  Attrs a;
  a.dim = dim;
  return a;
}

}  // namespace

GraphBuilder::Scope::Scope(GraphBuilder& builder, const std::string& name)
    : builder_(builder), saved_length_(builder.prefix_.size()) {
  builder_.prefix_ += name + ".";
}

GraphBuilder::Scope::~Scope() { builder_.prefix_.resize(saved_length_); }

ValueId GraphBuilder::op(OpKind kind, std::vector<ValueId> inputs, Attrs attrs,
                         const std::string& name) {
  return graph_.add(kind, std::move(inputs), std::move(attrs), label(name));
}

ValueId GraphBuilder::input(const std::string& name, Shape shape, DType dtype) {
  return graph_.add_input(label(name), std::move(shape), dtype);
}

ValueId GraphBuilder::param(const std::string& name, Shape shape, ParamInit init) {
  return graph_.add_param(label(name), std::move(shape), init);
}

ValueId GraphBuilder::fill(Shape shape, float value) {
  Attrs a;
  a.shape = std::move(shape);
  fill_value(a) = value;
  return op(OpKind::kFill, {}, std::move(a), "fill");
}

ValueId GraphBuilder::einsum(ValueId a, ValueId b, std::vector<std::string> out_dims,
                             const std::string& name) {
  return op(OpKind::kEinsum, {a, b}, dims_attrs(std::move(out_dims)), name);
}

// The elementwise ops: one node of their kind over their operands, no attrs.
#define TS_UNARY(fn, kind) \
  ValueId GraphBuilder::fn(ValueId x, const std::string& n) { return op(OpKind::kind, {x}, {}, n); }
#define TS_BINARY(fn, kind)                                              \
  ValueId GraphBuilder::fn(ValueId a, ValueId b, const std::string& n) { \
    return op(OpKind::kind, {a, b}, {}, n);                              \
  }
TS_BINARY(add, kAdd)
TS_BINARY(sub, kSub)
TS_BINARY(mul, kMul)
TS_BINARY(div, kDiv)
TS_BINARY(bias_gelu, kBiasGelu)
TS_UNARY(gelu, kGelu)
TS_UNARY(relu, kRelu)
TS_UNARY(exp, kExp)
TS_UNARY(log, kLog)
TS_UNARY(tanh, kTanh)
TS_UNARY(silu, kSilu)
TS_UNARY(sigmoid, kSigmoid)
TS_UNARY(sqrt, kSqrt)
TS_UNARY(rsqrt, kRsqrt)
#undef TS_UNARY
#undef TS_BINARY

ValueId GraphBuilder::scale(ValueId x, float alpha, const std::string& n) {
  Attrs a;
  scale_factor(a) = alpha;
  return op(OpKind::kScale, {x}, std::move(a), n);
}

ValueId GraphBuilder::dropout(ValueId x, float p, uint64_t seed, const std::string& key,
                              const std::string& row_dim) {
  Attrs a;
  dropout_p(a) = p;
  a.seed = seed;
  dropout_stream(a) = label(key);
  if (graph_.node(x).shape.has(row_dim)) dropout_row_dim(a) = row_dim;
  return op(OpKind::kDropout, {x}, std::move(a), key);
}

ValueId GraphBuilder::reduce_sum(ValueId x, std::vector<std::string> dims, const std::string& n) {
  return op(OpKind::kReduceSum, {x}, dims_attrs(std::move(dims)), n);
}
ValueId GraphBuilder::reduce_mean(ValueId x, std::vector<std::string> dims, const std::string& n) {
  return op(OpKind::kReduceMean, {x}, dims_attrs(std::move(dims)), n);
}
ValueId GraphBuilder::reduce_max(ValueId x, std::vector<std::string> dims, const std::string& n) {
  return op(OpKind::kReduceMax, {x}, dims_attrs(std::move(dims)), n);
}

ValueId GraphBuilder::expand(ValueId x, Shape target, const std::string& n) {
  Attrs a;
  a.shape = std::move(target);
  return op(OpKind::kExpand, {x}, std::move(a), n);
}

ValueId GraphBuilder::softmax(ValueId x, const std::string& dim, float scale,
                              const std::string& query_dim, const std::string& n) {
  Attrs a = dim_attrs(dim);
  causal_query_dim(a) = query_dim;
  softmax_scale(a) = scale;
  return op(OpKind::kSoftmax, {x}, std::move(a), n);
}

ValueId GraphBuilder::layernorm(ValueId x, ValueId gamma, ValueId beta, const std::string& dim,
                                float eps, const std::string& n) {
  Attrs a = dim_attrs(dim);
  layernorm_eps(a) = eps;
  return op(OpKind::kLayerNorm, {x, gamma, beta}, std::move(a), n);
}

ValueId GraphBuilder::embedding(ValueId table, ValueId ids, const std::string& vocab_dim,
                                const std::string& n) {
  return op(OpKind::kEmbedding, {table, ids}, dim_attrs(vocab_dim), n);
}

ValueId GraphBuilder::cross_entropy(ValueId logits, ValueId labels, const std::string& vocab_dim,
                                    const std::string& n) {
  return op(OpKind::kCrossEntropy, {logits, labels}, dim_attrs(vocab_dim), n);
}

ValueId GraphBuilder::linear_cross_entropy(ValueId h, ValueId w, ValueId labels,
                                           const std::string& vocab_dim,
                                           const std::string& embed_dim, const std::string& n) {
  Attrs a = dim_attrs(vocab_dim);
  a.dim2 = embed_dim;
  return tuple_get(op(OpKind::kLinearCrossEntropy, {h, w, labels}, std::move(a), n), 0,
                   n + ".loss");
}

ValueId GraphBuilder::rmsnorm(ValueId x, ValueId gamma, const std::string& dim, float eps,
                              const std::string& n) {
  Attrs a = dim_attrs(dim);
  rmsnorm_eps(a) = eps;
  return op(OpKind::kRmsNorm, {x, gamma}, std::move(a), n);
}

ValueId GraphBuilder::rotary(ValueId x, const std::string& dim, const std::string& position_dim,
                             float theta, const RotaryScaling& scaling, const std::string& n) {
  Attrs a = dim_attrs(dim);
  rotary_position_dim(a) = position_dim;
  rotary_theta(a) = theta;
  rotary_scaling(a) = rotary_scaling_text(scaling);
  return op(OpKind::kRotary, {x}, std::move(a), n);
}

ValueId GraphBuilder::tuple_get(ValueId tuple, int index, const std::string& n) {
  Attrs a;
  tuple_index(a) = index;
  return op(OpKind::kTupleGet, {tuple}, std::move(a), n);
}

GraphBuilder::Attention GraphBuilder::attention(ValueId q, ValueId k, ValueId v,
                                                const std::string& query, const std::string& key,
                                                const std::string& head, bool causal, float scale,
                                                const std::string& n,
                                                const ProbabilityDropout& dropout) {
  Attrs a;
  attention_dims(a) = {query, key, head};
  attention_scale(a) = scale;
  if (causal) causal_query_dim(a) = query;
  if (dropout.p != 0.0f) {
    attention_dropout_p(a) = dropout.p;
    a.seed = dropout.seed;
    attention_dropout_stream(a) = label(dropout.key);
  }
  const ValueId tuple = op(OpKind::kAttention, {q, k, v}, std::move(a), n);
  return {tuple, tuple_get(tuple, 0, n + ".out"), tuple_get(tuple, 1, n + ".lse")};
}

ValueId GraphBuilder::split_dim(ValueId x, const std::string& dim, Shape parts,
                                const std::string& n) {
  Attrs a = dim_attrs(dim);
  a.shape = std::move(parts);
  return op(OpKind::kSplitDim, {x}, std::move(a), n);
}

ValueId GraphBuilder::merge_dims(ValueId x, std::vector<std::string> dims,
                                 const std::string& merged, const std::string& n) {
  Attrs a = dims_attrs(std::move(dims));
  merged_dim(a) = merged;
  return op(OpKind::kMergeDims, {x}, std::move(a), n);
}

ValueId GraphBuilder::rename(ValueId x, const std::string& from, const std::string& to,
                             const std::string& n) {
  Attrs a = dim_attrs(from);
  renamed_to(a) = to;
  return op(OpKind::kRename, {x}, std::move(a), n);
}

}  // namespace tessel
