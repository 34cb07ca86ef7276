#include "tessel/autodiff/vjp_table.h"

#include <array>

#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"

namespace tessel {
namespace {

// Sums `grad` over the dims `target` lacks, undoing a broadcast.
ValueId unbroadcast(GraphBuilder& b, ValueId grad, const Shape& target) {
  const Shape g = b.shape(grad);
  std::vector<std::string> extra;
  for (const Dim& d : g.dims())
    if (!target.has(d.name)) extra.push_back(d.name);
  ValueId reduced = extra.empty() ? grad : b.reduce_sum(grad, extra, "unbroadcast");
  if (b.shape(reduced) == target) return reduced;
  // Same dims, other order: an einsum with a ones-free identity is overkill;
  // re-expanding to the target order is a pure copy.
  return b.expand(reduced, target, "reorder");
}

Attrs attrs_of(const VjpContext& c) { return c.node().attrs; }
std::string label(const VjpContext& c, const char* suffix) { return c.node().name + suffix; }

void add_rule(VjpContext& c) {
  c.input_grads[0] = unbroadcast(c.builder, c.grad, c.shape_of(c.in(0)));
  c.input_grads[1] = unbroadcast(c.builder, c.grad, c.shape_of(c.in(1)));
}

void sub_rule(VjpContext& c) {
  c.input_grads[0] = unbroadcast(c.builder, c.grad, c.shape_of(c.in(0)));
  ValueId neg = c.builder.scale(c.grad, -1.0f, label(c, ".neg"));
  c.input_grads[1] = unbroadcast(c.builder, neg, c.shape_of(c.in(1)));
}

void mul_rule(VjpContext& c) {
  GraphBuilder& b = c.builder;
  c.input_grads[0] =
      unbroadcast(b, b.mul(c.grad, c.in(1), label(c, ".grad_lhs")), c.shape_of(c.in(0)));
  c.input_grads[1] =
      unbroadcast(b, b.mul(c.grad, c.in(0), label(c, ".grad_rhs")), c.shape_of(c.in(1)));
}

// y = a / b: da = g / b; db = -(g / b) * y.
void div_rule(VjpContext& c) {
  GraphBuilder& b = c.builder;
  ValueId g_over_b = b.div(c.grad, c.in(1), label(c, ".grad_lhs"));
  c.input_grads[0] = unbroadcast(b, g_over_b, c.shape_of(c.in(0)));
  ValueId t = b.mul(g_over_b, c.output, label(c, ".grad_rhs"));
  c.input_grads[1] = unbroadcast(b, b.scale(t, -1.0f, label(c, ".neg")), c.shape_of(c.in(1)));
}

// y = einsum(a, b): da = einsum(g, b) -> a's dims; db = einsum(a, g) -> b's dims.
void einsum_rule(VjpContext& c) {
  GraphBuilder& b = c.builder;
  c.input_grads[0] = b.einsum(c.grad, c.in(1), c.shape_of(c.in(0)).names(), label(c, ".grad_lhs"));
  c.input_grads[1] = b.einsum(c.in(0), c.grad, c.shape_of(c.in(1)).names(), label(c, ".grad_rhs"));
}

// What a gradient op reads: the node's inputs 0 and 1, its output, the
// incoming gradient.
enum Operand { kIn0, kIn1, kOut, kGrad };

// A gradient that is one op `kGradOp` over `operands`, with the node's attrs
// (kAttrs) or none (the elementwise ops' gradients).
template <OpKind kGradOp, bool kAttrs, Operand... operands>
void one_op_rule(VjpContext& c) {
  auto value = [&](Operand o) { return o == kOut ? c.output : o == kGrad ? c.grad : c.in(o); };
  c.input_grads[0] = c.builder.op(kGradOp, {value(operands)...}, kAttrs ? attrs_of(c) : Attrs{},
                                  label(c, ".grad"));
}

void bias_gelu_rule(VjpContext& c) {
  GraphBuilder& b = c.builder;
  ValueId dpre = b.op(OpKind::kBiasGeluGrad, {c.in(0), c.in(1), c.grad}, {}, label(c, ".grad"));
  c.input_grads[0] = dpre;
  c.input_grads[1] = unbroadcast(b, dpre, c.shape_of(c.in(1)));
}

void reduce_sum_rule(VjpContext& c) {
  c.input_grads[0] = c.builder.expand(c.grad, c.shape_of(c.in(0)), label(c, ".grad"));
}

void reduce_mean_rule(VjpContext& c) {
  const Shape x = c.shape_of(c.in(0));
  float count = static_cast<float>(x.numel() / c.shape_of(c.output).numel());
  ValueId spread = c.builder.expand(c.grad, x, label(c, ".grad"));
  c.input_grads[0] = c.builder.scale(spread, 1.0f / count, label(c, ".grad_scale"));
}

void expand_rule(VjpContext& c) {
  c.input_grads[0] = unbroadcast(c.builder, c.grad, c.shape_of(c.in(0)));
}

// A fused op's tuple (value, log-sum-exp): only the value has a gradient
// rule. Returns the value's gradient (nullopt: none reaches it).
std::optional<ValueId> fused_value_grad(VjpContext& c) {
  const std::vector<std::optional<ValueId>>& g = *c.element_grads;
  if (g[1])
    TS_THROW("autodiff: ", op_name(c.node().kind), " '", c.node().name,
             "': its log-sum-exp is on the path to the loss; only its element 0 has a gradient "
             "rule");
  return g[0];
}

// The fused backward `kind` over `operands` (then the forward's log-sum-exp,
// the value's gradient and `more`); its tuple's elements are the gradients
// of the forward's inputs, named by `names`.
void fused_grad(VjpContext& c, OpKind kind, std::vector<ValueId> operands, ValueId grad,
                std::vector<ValueId> more, const std::vector<std::string>& names) {
  GraphBuilder& b = c.builder;
  operands.push_back(b.tuple_get(c.output, 1, label(c, ".lse")));
  operands.push_back(grad);
  operands.insert(operands.end(), more.begin(), more.end());
  const ValueId grads = b.op(kind, operands, attrs_of(c), label(c, ".grad"));
  for (size_t i = 0; i < names.size(); ++i)
    c.input_grads[i] = b.tuple_get(grads, static_cast<int>(i), label(c, names[i].c_str()));
}

// FlashAttention's backward: one attention_grad node recomputes the
// probabilities from q, k and the log-sum-exp and yields (dq, dk, dv); it
// reads the output too (ring attention's delta = rowsum(dout * out)).
void attention_rule(VjpContext& c) {
  const std::optional<ValueId> g = fused_value_grad(c);
  if (!g) return;
  const ValueId out = c.builder.tuple_get(c.output, 0, label(c, ".out"));
  fused_grad(c, OpKind::kAttentionGrad, {c.in(0), c.in(1), c.in(2)}, *g, {out},
             {".grad_q", ".grad_k", ".grad_v"});
}

// The loss's backward recomputes the logits from h, w and the log-sum-exp,
// tile by tile, and yields (dh, dw).
void linear_cross_entropy_rule(VjpContext& c) {
  const std::optional<ValueId> g = fused_value_grad(c);
  if (!g) return;
  fused_grad(c, OpKind::kLinearCrossEntropyGrad, {c.in(0), c.in(1), c.in(2)}, *g, {},
             {".grad_h", ".grad_w"});
}

// LayerNorm (x, gamma, beta) and RMSNorm (x, gamma): x's and gamma's
// gradients by their ops; beta's, the gradient summed to beta's shape.
void norm_rule(VjpContext& c) {
  GraphBuilder& b = c.builder;
  Attrs a = attrs_of(c);
  const bool layer = c.node().kind == OpKind::kLayerNorm;
  c.input_grads[0] = b.op(layer ? OpKind::kLayerNormGradInput : OpKind::kRmsNormGradInput,
                          {c.in(0), c.in(1), c.grad}, a, label(c, ".grad_input"));
  c.input_grads[1] = b.op(layer ? OpKind::kLayerNormGradGamma : OpKind::kRmsNormGradGamma,
                          {c.in(0), c.grad}, a, label(c, ".grad_gamma"));
  if (layer) c.input_grads[2] = unbroadcast(b, c.grad, c.shape_of(c.in(2)));
}

// y = sqrt(x): dx = g * 0.5 / y.
void sqrt_rule(VjpContext& c) {
  GraphBuilder& b = c.builder;
  c.input_grads[0] = b.div(b.scale(c.grad, 0.5f, label(c, ".half")), c.output, label(c, ".grad"));
}

// y = x^(-1/2): dx = -0.5 g y / x.
void rsqrt_rule(VjpContext& c) {
  GraphBuilder& b = c.builder;
  ValueId gy = b.mul(c.grad, c.output, label(c, ".gy"));
  c.input_grads[0] = b.scale(b.div(gy, c.in(0), label(c, ".gy_over_x")), -0.5f, label(c, ".grad"));
}

void embedding_rule(VjpContext& c) {
  Attrs a = attrs_of(c);
  a.shape = c.shape_of(c.in(0));
  c.input_grads[0] =
      c.builder.op(OpKind::kEmbeddingGrad, {c.in(1), c.grad}, std::move(a), label(c, ".grad"));
}

void split_rule(VjpContext& c) {
  std::vector<std::string> parts = c.node().attrs.shape.names();
  c.input_grads[0] = c.builder.merge_dims(c.grad, parts, c.node().attrs.dim, label(c, ".grad"));
}

void merge_rule(VjpContext& c) {
  const Shape x = c.shape_of(c.in(0));
  std::vector<Dim> parts;
  for (const std::string& n : c.node().attrs.dims) parts.push_back(x.dim(n));
  c.input_grads[0] =
      c.builder.split_dim(c.grad, merged_dim(c.node().attrs), Shape(parts), label(c, ".grad"));
}

void rename_rule(VjpContext& c) {
  c.input_grads[0] =
      c.builder.rename(c.grad, renamed_to(c.node().attrs), c.node().attrs.dim, label(c, ".grad"));
}

struct Entry {
  OpKind kind;
  VjpRule rule;
};

constexpr std::array<Entry, static_cast<size_t>(OpKind::kCount)> kVjpTable = {{
    {OpKind::kInput, nullptr},
    {OpKind::kParam, nullptr},
    {OpKind::kFill, nullptr},
    {OpKind::kEinsum, einsum_rule},
    {OpKind::kAdd, add_rule},
    {OpKind::kSub, sub_rule},
    {OpKind::kMul, mul_rule},
    {OpKind::kDiv, div_rule},
    {OpKind::kScale, one_op_rule<OpKind::kScale, true, kGrad>},  // the same scaling
    {OpKind::kGelu, one_op_rule<OpKind::kGeluGrad, false, kIn0, kGrad>},
    {OpKind::kRelu, one_op_rule<OpKind::kReluGrad, false, kIn0, kGrad>},
    {OpKind::kExp, one_op_rule<OpKind::kMul, false, kGrad, kOut>},  // g * exp(x)
    {OpKind::kLog, one_op_rule<OpKind::kDiv, false, kGrad, kIn0>},  // g / x
    {OpKind::kTanh, one_op_rule<OpKind::kTanhGrad, false, kOut, kGrad>},
    {OpKind::kBiasGelu, bias_gelu_rule},
    // The mask is a pure function of (seed, key, index): the same dropout
    // applied to the gradient is the exact backward.
    {OpKind::kDropout, one_op_rule<OpKind::kDropout, true, kGrad>},
    {OpKind::kReduceSum, reduce_sum_rule},
    {OpKind::kReduceMean, reduce_mean_rule},
    {OpKind::kReduceMax, one_op_rule<OpKind::kReduceMaxGrad, true, kIn0, kOut, kGrad>},
    {OpKind::kExpand, expand_rule},
    {OpKind::kSoftmax, one_op_rule<OpKind::kSoftmaxGrad, true, kOut, kGrad>},
    {OpKind::kLayerNorm, norm_rule},
    {OpKind::kEmbedding, embedding_rule},
    {OpKind::kCrossEntropy, one_op_rule<OpKind::kCrossEntropyGrad, true, kIn0, kIn1, kGrad>},
    {OpKind::kSplitDim, split_rule},
    {OpKind::kMergeDims, merge_rule},
    {OpKind::kRename, rename_rule},
    {OpKind::kTupleGet, nullptr},  // build_backward routes the gradient to the tuple's element
    {OpKind::kAttention, attention_rule},
    {OpKind::kAttentionGrad, nullptr},
    {OpKind::kLinearCrossEntropy, linear_cross_entropy_rule},
    {OpKind::kLinearCrossEntropyGrad, nullptr},
    {OpKind::kGeluGrad, nullptr},
    {OpKind::kReluGrad, nullptr},
    {OpKind::kTanhGrad, nullptr},
    {OpKind::kBiasGeluGrad, nullptr},
    {OpKind::kReduceMaxGrad, nullptr},
    {OpKind::kSoftmaxGrad, nullptr},
    {OpKind::kLayerNormGradInput, nullptr},
    {OpKind::kLayerNormGradGamma, nullptr},
    {OpKind::kEmbeddingGrad, nullptr},
    {OpKind::kCrossEntropyGrad, nullptr},
    {OpKind::kSilu, one_op_rule<OpKind::kSiluGrad, false, kIn0, kGrad>},
    {OpKind::kSigmoid, one_op_rule<OpKind::kSigmoidGrad, false, kOut, kGrad>},
    {OpKind::kSqrt, sqrt_rule},
    {OpKind::kRsqrt, rsqrt_rule},
    {OpKind::kRmsNorm, norm_rule},
    // A rotation's transpose is the rotation by the opposite angle.
    {OpKind::kRotary, one_op_rule<OpKind::kRotaryGrad, true, kGrad>},
    {OpKind::kSiluGrad, nullptr},
    {OpKind::kSigmoidGrad, nullptr},
    {OpKind::kRmsNormGradInput, nullptr},
    {OpKind::kRmsNormGradGamma, nullptr},
    {OpKind::kRotaryGrad, nullptr},
    {OpKind::kShardSlice, nullptr},
    {OpKind::kAllGather, nullptr},
    {OpKind::kReduceScatter, nullptr},
    {OpKind::kAllReduce, nullptr},
    {OpKind::kAllToAll, nullptr},
    {OpKind::kZeroUnlessRoot, nullptr},
}};

static_assert(lists_every_kind_in_order(kVjpTable),
              "kVjpTable must list every OpKind in enum order");

}  // namespace

VjpRule vjp_rule(OpKind kind) { return kVjpTable.at(static_cast<size_t>(kind)).rule; }

}  // namespace tessel
