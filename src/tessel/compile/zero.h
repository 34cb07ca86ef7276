// ZeRO as placements: what each stage shards over the data axis.
//
// The data axis is the mesh axis `batch` maps to; N is its size. For every
// parameter whose leading dim d is not split on another axis and whose local
// leading size divides by N, ZeRO gives:
//   stage 1, 2: the gradient the target S(d) on the data axis (the lowering
//               emits a reduce-scatter instead of an all-reduce); AdamW
//               updates the slice and an all-gather restores the parameter;
//   stage 3:    the parameter itself the same target. It is stored as that
//               shard and gathered on use, once in forward and once in
//               backward (sharding/lower.h); the update writes the shard in
//               place and nothing is gathered after it.
// Other parameters stay replicated on the data axis at every stage. Optimizer
// state always follows the gradient's sharding.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/placement.h"

namespace tessel {

// The sharding ZeRO gives `param` (and its gradient) on `data_axis`, or
// nothing if the parameter stays replicated there.
std::optional<Sharding> zero_sharding(const Node& param, const Layout& layout, const Mesh& mesh,
                                      int data_axis);

// Lowering targets for `zero` (0-3) on `graph`: the gradients `grads` (one per
// graph parameter, in order; empty for a forward-only graph) from stage 1,
// the parameters themselves at stage 3. Empty for stage 0. Throws if the
// layout maps `batch` to no mesh axis.
std::map<ValueId, Sharding> zero_targets(const Graph& graph, const std::vector<ValueId>& grads,
                                         const Layout& layout, const Mesh& mesh, int zero);

}  // namespace tessel
