// The VJP table: one reverse-mode gradient rule per OpKind, in enum order.
//
// A rule sees the forward node, its output value and the gradient flowing
// into that output, and emits ordinary IR nodes computing the gradient of
// each input (or nothing for inputs without a gradient, such as token ids).
// Gradient nodes are plain ops, so later passes treat them like any other.
#pragma once

#include <optional>
#include <vector>

#include "tessel/ir/builder.h"

namespace tessel {

struct VjpContext {
  GraphBuilder& builder;
  ValueId output;  // the forward node (its value is the op's output)
  ValueId grad;    // d(loss)/d(output)
  std::vector<std::optional<ValueId>>& input_grads;  // one slot per input, filled by the rule
  // A tuple (ir/tuple.h; `grad` is then -1): the gradient flowing into each
  // element through its tuple_get views, where one flows.
  const std::vector<std::optional<ValueId>>* element_grads = nullptr;

  const Node& node() const { return builder.graph().node(output); }
  ValueId in(int i) const { return node().inputs[i]; }
  // By value: adding nodes may move the graph's storage.
  Shape shape_of(ValueId v) const { return builder.graph().node(v).shape; }
};

using VjpRule = void (*)(VjpContext& ctx);

// nullptr for ops without a gradient (leaves and gradient ops themselves).
VjpRule vjp_rule(OpKind kind);

}  // namespace tessel
