// Execution of the nodes that exist only on a rank's local graph: the
// collectives and local reshards the boxing inserts, and the sharded forms of
// embedding, cross-entropy and dropout (vocab shards, row shares, global
// element indices). Collectives on a split dim that is not the leading one
// pack and unpack through scratch with strided copies (kernels::expand).
#pragma once

#include <cstddef>

#include "tessel/backend/op_call.h"
#include "tessel/comm/comm_groups.h"

namespace tessel {

// True if `node` is executed here rather than by the single-process kernels.
bool is_sharded_op(const Node& node);
void execute_sharded_op(const OpCall& call, const CommGroups* comms);
size_t sharded_scratch_bytes(const Graph& graph, const Node& node);
// Scratch of an all-gather that carries bf16 (OpCall::bf16_out), with its
// input in bf16 storage (in_bf16) or f32 (rounded into scratch first).
size_t bf16_all_gather_scratch_bytes(const Graph& graph, const Node& node, bool in_bf16);
// Scratch of a partial sum that carries bf16 (OpCall::bf16_sum): the
// communicator's work buffer, after a reduce-scatter's f32 packing.
size_t bf16_sum_scratch_bytes(const Graph& graph, const Node& node);
// The share of the global rows (attrs.total) that a loss's `rows` local rows
// are (1 when rows are not split).
double row_share(const OpCall& call, int64_t rows);

}  // namespace tessel
