#include "tessel/ir/graph_copy.h"

namespace tessel {

ValueId copy_node(Graph& out, const Node& node, const std::vector<ValueId>& map) {
  if (node.kind == OpKind::kInput) return out.add_input(node.name, node.shape, node.dtype);
  if (node.kind == OpKind::kParam) return out.add_param(node.name, node.shape, node.init);
  std::vector<ValueId> inputs;
  for (ValueId in : node.inputs) inputs.push_back(map[in]);
  return out.add(node.kind, inputs, node.attrs, node.name);
}

}  // namespace tessel
