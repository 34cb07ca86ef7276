// Execution of the nodes that exist only on a rank's local graph: the
// collectives and local reshards the boxing inserts, and the sharded forms of
// embedding, cross-entropy and dropout (vocab shards, row shares, global
// element indices). Collectives on a split dim that is not the leading one
// pack and unpack through scratch with strided copies (kernels::expand).
#pragma once

#include <cstddef>

#include "tessel/runtime/comm_groups.h"
#include "tessel/runtime/execute_op.h"

namespace tessel {

// True if `node` is executed here rather than by the single-process kernels.
bool is_sharded_op(const Node& node);
void execute_sharded_op(const OpCall& call, const CommGroups* comms);
size_t sharded_scratch_bytes(const Graph& graph, const Node& node);

}  // namespace tessel
