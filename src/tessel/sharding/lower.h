// Lowering a global graph to one rank's local graph.
//
// Every value gets the sharding its layout names (its target). Each op then
// picks, axis by axis, the signature (signature.h) that moves the fewest
// bytes given its inputs' shardings; inputs are boxed into the placements it
// needs and its output boxed to the target (boxing.h). The result is an
// ordinary Graph over this rank's local shapes whose collectives are nodes —
// the shape rules check every local shape again — plus what `inspect` shows.
// Parameters are used as the layout places them. A parameter whose target
// splits it more finely than the layout (ZeRO-3) is stored that way and
// gathered on use: once per phase (forward, backward), just before its first
// use in the phase, so the memory plan frees the gathered copy after the
// phase's last use.
// Pure: needs no communicator, so any rank's program can be built offline.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/sharding/boxing.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/placement.h"

namespace tessel {

struct InsertedCollective {
  ValueId local;  // the node in the local graph
  OpKind op;
  std::string axis;
  std::string value;   // label of the global value converted
  std::string reason;  // "input 1 of einsum 'block0.mlp.proj'" or "output to target"
  std::string from, to;
  double bytes;  // bytes this rank sends per run
};

struct LocalGraph {
  Graph graph;
  std::vector<ValueId> local_of;      // global value -> local value (at its target sharding)
  std::vector<Sharding> sharding_of;  // global value -> its sharding (the target)
  // Global value -> the local graph's size when its lowering began (its
  // boxing and node come from there on); -1 if not lowered. Phase starts of
  // a global graph map to local ones through it.
  std::vector<int> first_local_of;
  // The local graph's first node at or after global node `start` (its size
  // if none): where a phase that begins at `start` begins locally.
  ValueId first_local_at(ValueId start) const;
  // Every conversion inserted; a Program runs those its outputs need
  // (Program::computes).
  std::vector<InsertedCollective> collectives;
};

// One node of a boxing, as emit_boxing appended it.
struct EmittedTransition {
  ValueId local;  // the node in the local graph
  Transition transition;
};

// Appends to `graph` the nodes that convert `local` (this rank's block of the
// global value `label`, of shape `global`, under `from`) to `to`, one node per
// Transition of plan_boxing; returns the converted value (`local` itself if
// from == to). `coords` are this rank's mesh coordinates. `overlap` marks the
// sum all-reduces of a program output that no node reads as bucketable. The lowering boxes every
// value through this; tests call it on hand-built local graphs.
ValueId emit_boxing(Graph& graph, ValueId local, const Shape& global, const std::string& label,
                    const Sharding& from, const Sharding& to, const Mesh& mesh,
                    const std::vector<int>& coords, bool overlap = false,
                    std::vector<EmittedTransition>* emitted = nullptr);

struct LoweringOptions {
  // Overrides the layout's target for individual values: ZeRO's sharded
  // gradients and (stage 3) sharded parameters, which are gathered on use.
  std::map<ValueId, Sharding> targets;
  // Nodes with ids above this one (the loss) form the backward phase: a
  // parameter gathered on use is gathered again there rather than kept alive
  // from forward. Absent: the whole graph is one phase.
  std::optional<ValueId> phase_boundary = std::nullopt;
};

// Lowers the nodes `outputs` depend on. REQUIRES: layout.validate(global, mesh) passed.
LocalGraph lower_to_rank(const Graph& global, const std::vector<ValueId>& outputs, const Mesh& mesh,
                         const Layout& layout, int rank, const LoweringOptions& options = {});

}  // namespace tessel
