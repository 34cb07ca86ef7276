// Dropout as the CPU backend runs it: which mask each element of a dropout node
// draws.
//
// The mask of an element is keyed by (seed, label, step, global row,
// element within the row). The step and the micro-batch are run-time values
// (DropoutPosition) a Program holds and every dropout instruction reads, so a
// program is compiled once and draws a new mask each step. The global row
// is microbatch * rows + shard offset + local row, where `rows` is the
// micro-batch's global row count (the row dim is attrs.dim, "batch" for the
// models); micro-batches are consecutive row blocks of the batch, so a row
// draws the same mask however the batch is cut into micro-batches or
// sharded. The element within the row is its row-major index over the
// node's other dims at their global sizes, so model-split dims draw by
// global index too. A node without the row dim is one row per micro-batch.
// The backward node (same attrs, same shape) redraws the identical mask, and
// so does a recomputed clone.
#pragma once

#include <array>
#include <cstdint>

#include "tessel/backend/op_call.h"

namespace tessel {

// The counters a dropout over the global shape `global` draws, its row dim
// at index `row` (-1: none): element (c_0, ..., c_n-1) of micro-batch m (all
// global coordinates) draws m * microbatch + sum c_i * stride[i]. The fused
// attention op draws its probabilities' mask the same way
// (backend/cpu/attention_op.h).
struct DropoutCounters {
  static constexpr int kMaxRank = 8;  // fixed storage: a run allocates nothing
  std::array<int64_t, kMaxRank> stride{};
  int64_t microbatch = 0;
};
DropoutCounters dropout_counters(const Shape& global, int row);

// Runs a dropout node (whole, or a rank's shard: attrs.offsets and the global attrs.shape).
void execute_dropout(const OpCall& call);

}  // namespace tessel
