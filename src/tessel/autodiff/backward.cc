#include "tessel/autodiff/backward.h"

#include <optional>

#include "tessel/autodiff/vjp_table.h"
#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"

namespace tessel {

std::map<ValueId, ValueId> build_backward(GraphBuilder& builder, ValueId loss,
                                          const std::vector<ValueId>& wrt) {
  Graph& graph = builder.graph();
  const Node& loss_node = graph.node(loss);
  if (loss_node.shape.rank() != 0 || loss_node.dtype != DType::kF32)
    TS_THROW("autodiff: the loss '", loss_node.name, "' must be an f32 scalar, got ",
             dtype_name(loss_node.dtype), loss_node.shape);

  // Which forward nodes lie on a path to the loss.
  const int forward_size = loss + 1;
  const std::vector<bool> reaches_loss = ancestors(graph, {loss});

  std::vector<std::optional<ValueId>> grad(forward_size);
  // Per tuple (ir/tuple.h): the gradient of each element its tuple_get views
  // carried back (a tuple's own slot in `grad` stays empty).
  std::map<ValueId, std::vector<std::optional<ValueId>>> element_grads;
  auto accumulate = [&](std::optional<ValueId>& slot, ValueId g, ValueId of) {
    slot = slot ? builder.add(*slot, g, graph.node(of).name + ".grad_sum") : g;
  };
  grad[loss] = builder.fill(Shape{}, 1.0f);
  for (ValueId id = loss; id >= 0; --id) {
    auto tuple_grads = element_grads.find(id);
    if (!grad[id] && tuple_grads == element_grads.end()) continue;
    const Node node = graph.node(id);  // copy: the graph grows below
    if (node.kind == OpKind::kTupleGet) {
      const ValueId tuple = node.inputs[0];
      auto& slots = element_grads[tuple];
      slots.resize(graph.node(tuple).elements.size());
      accumulate(slots.at(tuple_index(node.attrs)), *grad[id], id);
      continue;
    }
    if (node.inputs.empty()) continue;
    VjpRule rule = vjp_rule(node.kind);
    if (!rule)
      TS_THROW("autodiff: ", op_name(node.kind), " '", node.name,
               "' has no gradient rule (is a gradient op on the path to the loss?)");
    std::vector<std::optional<ValueId>> input_grads(node.inputs.size());
    VjpContext ctx{builder, id, grad[id] ? *grad[id] : -1, input_grads};
    if (tuple_grads != element_grads.end()) ctx.element_grads = &tuple_grads->second;
    rule(ctx);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ValueId in = node.inputs[i];
      if (!input_grads[i] || !reaches_loss[in]) continue;
      accumulate(grad[in], *input_grads[i], in);
    }
  }

  std::map<ValueId, ValueId> result;
  for (ValueId v : wrt) {
    TS_CHECK(v < forward_size, "autodiff: value %", v, " was added after the loss");
    result[v] = grad[v] ? *grad[v] : builder.fill(graph.node(v).shape, 0.0f);
  }
  return result;
}

}  // namespace tessel
