// Activation recomputation as a graph pass (Chen et al., "sublinear memory").
//
// A segment function puts forward nodes into named segments, or into none
// (their values stay stored). A backward node that reads a value computed
// inside a segment reads a recomputed clone of it instead: the value and its
// ancestors within the same segment are cloned just before the first
// backward node that needs them, each at most once, and the clones read
// everything outside the segment (the segment's inputs: the residual stream
// entering a block, parameters, stored projections) from the stored forward
// values. The memory planner then frees a segment's internal activations
// after their last forward use. Clones carry the same labels, so dropout
// masks (keyed by label and index) and results are bitwise equal to the
// stored ones. Works on any graph before sharding, so it composes with every
// layout and with pipeline stage graphs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

// The segment of a forward node of `graph` (never called for inputs or
// parameters); "" keeps its value stored.
using SegmentFn = std::function<std::string(const Graph& graph, const Node&)>;

struct RecomputeResult {
  Graph graph;
  std::vector<ValueId> remap;   // old value -> new value
  int segments = 0;             // segments that were recomputed (at least one clone)
  std::vector<ValueId> clones;  // the recomputed nodes, ids in `graph`
  double recomputed_flops = 0;  // node_flops summed over the clones
};

// `forward_end`: nodes [0, forward_end) are the forward pass; the rest read
// recomputed values where `segment_of` says so.
RecomputeResult recompute_segments(const Graph& graph, int forward_end,
                                   const SegmentFn& segment_of);

}  // namespace tessel
