#include "tessel/plan/model/kernel_work.h"

#include "tessel/ir/attrs.h"
#include "tessel/sharding/context_parallel.h"

namespace tessel::plan {

namespace {

// A causal attention that runs whole on one rank skips its masked half.
double causal_share(const Node& n) {
  return is_attention_op(n.kind) && n.attrs.axis.empty() && !causal_query_dim(n.attrs).empty()
             ? 0.5
             : 1.0;
}

}  // namespace

double kernel_work_flops(const Graph& g, ValueId node) {
  return causal_share(g.node(node)) * g.node_flops(node);
}

double instruction_bytes(const Graph& g, ValueId node) {
  double bytes = value_bytes(g, node);
  for (ValueId in : g.node(node).inputs) bytes += value_bytes(g, in);
  return bytes;
}

double kernel_work_draws(const Graph& g, ValueId node) {
  const Node& n = g.node(node);
  if (n.kind == OpKind::kDropout && dropout_p(n.attrs) > 0)
    return static_cast<double>(n.shape.numel());
  if (!is_attention_op(n.kind) || attention_dropout_p(n.attrs) <= 0) return 0;
  const Shape probabilities =
      attention_probabilities_shape(n.attrs, g.node(n.inputs[0]).shape, g.node(n.inputs[1]).shape);
  return causal_share(n) * static_cast<double>(probabilities.numel());
}

}  // namespace tessel::plan
