#include "tessel/backend/cpu/dropout_op.h"

#include <array>

#include "tessel/backend/op_call.h"
#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/ir/attrs.h"
#include "tessel/kernels/dropout.h"

namespace tessel {

// Counter stride of each dim: the row dim strides by a whole row, the
// others row-major over the remaining dims at their global sizes; a
// micro-batch is the global rows (one row without a row dim).
DropoutCounters dropout_counters(const Shape& global, int row) {
  const int rank = global.rank();
  TS_CHECK(rank <= DropoutCounters::kMaxRank, "dropout: rank ", rank, " exceeds ",
           DropoutCounters::kMaxRank);
  DropoutCounters c;
  int64_t row_numel = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (i == row) continue;
    c.stride[i] = row_numel;
    row_numel *= global[i].size;
  }
  if (row >= 0) c.stride[row] = row_numel;
  c.microbatch = (row >= 0 ? global[row].size : 1) * row_numel;
  return c;
}

void execute_dropout(const OpCall& call) {
  const Attrs& at = call.node.attrs;
  const Shape& local = call.node.shape;
  // An unlowered graph (a single process without lowering): local is global.
  const bool sharded = !at.offsets.empty();
  const Shape& global = sharded ? at.shape : local;
  const int rank = local.rank();
  if (sharded && (static_cast<int>(at.offsets.size()) != rank || global.rank() != rank))
    TS_THROW("dropout '", call.node.name, "': shard offsets for ", at.offsets.size(),
             " dims on a rank-", rank, " value");
  const int row =
      dropout_row_dim(at).empty() ? -1 : local.index_of(dropout_row_dim(at)).value_or(-1);
  if (!dropout_row_dim(at).empty() && row < 0)
    TS_THROW("dropout '", call.node.name, "': row dim '", dropout_row_dim(at), "' is not in ",
             local.to_string());
  if (rank > DropoutCounters::kMaxRank)
    TS_THROW("dropout '", call.node.name, "': rank ", rank, " exceeds ", DropoutCounters::kMaxRank);
  const DropoutCounters counters = dropout_counters(global, row);
  const std::array<int64_t, DropoutCounters::kMaxRank>& stride = counters.stride;
  auto offset = [&](int i) { return sharded ? at.offsets[i] : int64_t{0}; };
  const int64_t base = call.position.microbatch * counters.microbatch;

  const uint64_t step = static_cast<uint64_t>(call.position.step);
  const uint64_t key = hash_name(dropout_stream(at));
  auto dropout = call.reference ? kernels::dropout_ref : kernels::dropout;
  const float* x = in_f32(call, 0);
  float* y = static_cast<float*>(call.out);
  if (rank == 0) return dropout(x, y, 1, dropout_p(at), at.seed, key, step, base, 1);
  // One kernel call per run of the innermost local dim.
  const int64_t inner = local[rank - 1].size;
  const int64_t runs = inner > 0 ? local.numel() / inner : 0;
  for (int64_t r = 0; r < runs; ++r) {
    int64_t rest = r, index = base + offset(rank - 1) * stride[rank - 1];
    for (int i = rank - 2; i >= 0; --i) {
      const int64_t coord = rest % local[i].size;
      rest /= local[i].size;
      index += (coord + offset(i)) * stride[i];
    }
    dropout(x + r * inner, y + r * inner, inner, dropout_p(at), at.seed, key, step, index,
            stride[rank - 1]);
  }
}

}  // namespace tessel
