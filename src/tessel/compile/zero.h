// ZeRO: what each stage shards over the data axis.
//
// The data axis is the mesh axis `batch` maps to; N is its size. A single
// program without one shards over a context-parallel axis instead
// (Layout::zero_axis: one only `seq` maps to, whose ranks hold replicas of
// the weights); a parameter the layout already splits there (the GPT's
// position table) keeps its shard as its state. Pipelines shard over the
// data axis only. Every
// parameter's optimizer state is a flat shard (FlatShard): the rank's local
// block of the parameter (under its layout) flattened, split into N equal
// contiguous chunks (the last padded), data rank k owning chunk k, whatever
// the parameter's dims and layout (as DeepSpeed and FSDP do). AdamW updates
// that chunk of the parameter and an all-gather over the flat block restores
// it (train/program_engine.h, train/pipeline_engine.h).
//
// Where the gradient's chunk comes from:
//  - a pipeline (stages 1, 2): the engine reduce-scatters each accumulated
//    gradient's flat block over data, every parameter;
//  - a single program: for a parameter whose leading dim d is not split on
//    another axis and whose local leading size divides by N, chunk k is the
//    k-th slice of d, so the lowering target S(d) on the data axis (a
//    reduce-scatter instead of an all-reduce) yields exactly the chunk; other
//    parameters' gradients are all-reduced whole and the update reads their
//    chunk from it (optimizer state still 1/N; their gradients are not).
//  - stage 3 (single programs only): a parameter with the S(d) target is
//    stored as that shard and gathered on use, once in forward and once in
//    backward (sharding/lower.h); its update writes the shard in place and
//    nothing is gathered after it. Other parameters stay whole, with flat
//    optimizer state as at stage 1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/placement.h"

namespace tessel {

// A flat shard of one parameter's local block (`block` elements) over the
// `ranks` ranks of mesh axis `axis`: chunk() elements each, rank k's at
// offset(k), count(k) of them real (the last chunks hold the padding).
struct FlatShard {
  int axis = -1;
  int ranks = 1;
  int64_t block = 0;
  int64_t chunk() const { return (block + ranks - 1) / ranks; }
  int64_t padded() const { return chunk() * ranks; }
  int64_t offset(int k) const { return std::min(block, k * chunk()); }
  int64_t count(int k) const { return std::min(block, (k + 1) * chunk()) - offset(k); }
};

// The flat shard of a `block`-element local block over `data_axis` of
// `mesh`, or nothing when that axis has one rank (or none).
std::optional<FlatShard> flat_shard(int64_t block, const Mesh& mesh, int data_axis);

// The sharding a single program's lowering gives `param`'s gradient (and at
// stage 3 the parameter) on `data_axis`: S(leading dim), or nothing if the
// leading dim is split elsewhere or its local size does not divide.
std::optional<Sharding> zero_sharding(const Node& param, const Layout& layout, const Mesh& mesh,
                                      int data_axis);

// Lowering targets for `zero` (0-3) on `graph`: the gradients `grads` (one per
// graph parameter, in order; empty for a forward-only graph) from stage 1,
// the parameters themselves at stage 3. Empty for stage 0. Throws if the
// layout maps `batch` to no mesh axis.
std::map<ValueId, Sharding> zero_targets(const Graph& graph, const std::vector<ValueId>& grads,
                                         const Layout& layout, const Mesh& mesh, int zero);

}  // namespace tessel
