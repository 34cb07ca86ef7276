// Activation recomputation as a graph pass (Chen et al., "sublinear memory").
//
// Forward nodes are grouped into segments by label prefix (the GPT's
// "block3." nodes form segment "block3"). Backward nodes that read a value
// computed inside a segment instead read a clone of that segment, emitted
// just before the first backward node that needs it; the clones read the
// segment's inputs (the residual stream entering the block, parameters),
// which stay stored. The memory planner then frees each segment's internal
// activations after their last forward use. Clones carry the same labels,
// so dropout masks (keyed by label and index) and results are bitwise equal
// to the stored ones. Works on the global graph, before sharding, so it
// composes with every layout.
#pragma once

#include <string>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

struct RecomputeResult {
  Graph graph;
  std::vector<ValueId> remap;  // old value -> new value
  int segments = 0;            // segments that were recomputed
};

// `forward_end`: nodes [0, forward_end) are the forward pass. A node belongs
// to segment S when its label starts with S + "." for a prefix S matching
// `segment_prefix` followed by digits (e.g. "block" -> "block0", "block1").
RecomputeResult recompute_segments(const Graph& graph, int forward_end,
                                   const std::string& segment_prefix);

}  // namespace tessel
