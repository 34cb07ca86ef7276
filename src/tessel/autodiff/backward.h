// Reverse-mode autodiff as a graph pass.
//
// Appends to the graph the nodes computing d(loss)/d(v) for each requested
// value v (usually every parameter), walking the forward nodes in reverse
// topological order and applying the VJP table. Contributions to a value used
// several times (a tied embedding) are summed with add nodes, in a fixed order.
#pragma once

#include <map>
#include <vector>

#include "tessel/ir/builder.h"

namespace tessel {

// REQUIRES: loss is a scalar f32 value of the builder's graph.
// Returns value -> gradient value for each of `wrt` (a fill of zeros where the
// loss does not depend on it). Throws naming the op when a node on the path
// has no gradient rule.
std::map<ValueId, ValueId> build_backward(GraphBuilder& builder, ValueId loss,
                                          const std::vector<ValueId>& wrt);

}  // namespace tessel
