// Copying nodes between graphs: the building block of passes that rewrite.
//
// A pass that reorders, clones or splits a graph builds a new one node by
// node; copy_node re-adds a node (leaves by name, ops through the shape
// rules again) with its inputs mapped to the new graph.
#pragma once

#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

// Adds `node` to `out` with each input id mapped through `map` (old -> new).
// Inputs and parameters are re-declared by name, so `map` is not consulted.
ValueId copy_node(Graph& out, const Node& node, const std::vector<ValueId>& map);

}  // namespace tessel
