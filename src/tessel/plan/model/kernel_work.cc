#include "tessel/plan/model/kernel_work.h"

#include "tessel/ir/attrs.h"

namespace tessel::plan {

double kernel_work_flops(const Graph& g, ValueId node) {
  const Node& n = g.node(node);
  const bool attention = n.kind == OpKind::kAttention || n.kind == OpKind::kAttentionGrad;
  const bool whole_causal = attention && n.attrs.axis.empty() && !causal_query_dim(n.attrs).empty();
  return (whole_causal ? 0.5 : 1.0) * g.node_flops(node);
}

}  // namespace tessel::plan
