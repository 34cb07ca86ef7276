// Boxing: converting a value from one sharding to another.
//
// The transition table, per mesh axis (the value's other axes unchanged):
//
//   from -> to        what runs on that axis
//   P    -> B         all-reduce
//   P    -> S(d)      reduce-scatter
//   S(d) -> B         all-gather
//   B    -> S(d)      local slice, no traffic
//   S(d) -> S(e)      all-to-all
//   B    -> P(sum)    keep on coordinate 0, zeros elsewhere (local)
//   S(d) -> P(sum)    all-gather, then as B -> P
//
// An n-D conversion is planned axis by axis, cheapest-first: local slices,
// then reductions (which shrink or keep volume), then all-to-alls, then
// gathers (which grow it); a step that splits a dim another axis still splits
// waits until that axis has gathered or moved it, unless the split nests
// inside that axis's (an earlier axis that keeps it: placement.h). The plan is a list of
// Transitions, kept apart from its execution (the lowering turns each into a
// node of the local graph).
#pragma once

#include <vector>

#include "tessel/base/shape.h"
#include "tessel/ir/op.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/placement.h"

namespace tessel {

struct Transition {
  int axis;
  Placement from, to;
  OpKind op;       // the node that performs it
  double bytes;    // bytes this rank sends for it (cost model and stats)
  Sharding after;  // the value's sharding once this step is done
};

// Throws (naming the placements and axis) for a conversion the table lacks,
// such as P(max) -> S or P -> P of another kind.
std::vector<Transition> plan_boxing(const Shape& global, const Sharding& from, const Sharding& to,
                                    const Mesh& mesh);

// Bytes one rank sends to convert a value of `local_bytes` (its current local
// size) on an axis of size n; 0 for local steps.
double transition_bytes(const Placement& from, const Placement& to, double local_bytes, int n);

}  // namespace tessel
