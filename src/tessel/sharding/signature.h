// Placement signatures: which placements each op accepts and produces.
//
// One entry per OpKind, in enum order (the table in signature.cc). An entry
// names the op's family — how its dims flow from inputs to output — and the
// dims it cannot have split (a softmax's own dim, a norm's dim). From that,
// candidates() lists, for one mesh axis, every signature the op accepts: all
// inputs and the output Broadcast, or one dim d split — inputs holding d get
// S(d), the others B, and the output S(d), or P(sum) when d is contracted or
// reduced away (einsum, reduce_sum, ...). The lowering picks the candidate
// that moves the fewest bytes.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/sharding/placement.h"

namespace tessel {

struct AxisSignature {
  std::string dim;  // the split dim ("" for all-Broadcast)
  std::vector<Placement> inputs;
  Placement output;
};

// True for linear ops (sums, scaling, views): partial inputs, partial output.
bool passes_partial(OpKind kind);

// The sharding of element `index` of tuple `tuple` (ir/tuple.h) placed as
// `s`, per axis where the element lacks the split dim:
// - attention: a split query dim is its key dim (dk, dv; ring attention);
// - linear_cross_entropy: a split row dim leaves the loss and dw partial
//   sums; a split vocab leaves the loss and log-sum-exp whole (the kernel
//   reduced them across the axis) and dh a partial sum.
Sharding tuple_element_sharding(const Node& tuple, const Sharding& s, int index);

// Signatures `node` accepts on one axis of size `axis_size`; dims in `taken`
// are already split on another axis for this node and are not offered.
std::vector<AxisSignature> candidates(const Graph& graph, const Node& node, int axis_size,
                                      const std::set<std::string>& taken);

}  // namespace tessel
