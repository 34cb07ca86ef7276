// What a rank's training engine stores outside its programs' arenas, derived
// once from its compile: every parameter with its value and gradient/state
// shardings, local sizes and replica count, the full-batch inputs the engine
// stages, and the host buffers sized from those.
//
// The engines (train/engine.h) allocate exactly this and the memory
// prediction (memory_report.h) sums exactly this, so the two cannot drift.
// Invariants: `params` is the model's parameter order (the single program's
// graph order, the pipeline's PipelineModel::params() order); a parameter is
// `held` by this rank when one of the rank's stages reads it (always without
// a pipeline); `replicas` counts the ranks whose gradient copy of this
// parameter (or of its ZeRO slice) is identical, so a global sum of squares
// weights each rank's local sum by 1 / replicas.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessel/base/dtype.h"
#include "tessel/base/shape.h"
#include "tessel/compile/zero.h"
#include "tessel/ir/graph.h"
#include "tessel/sharding/placement.h"

namespace tessel {

struct CompiledRank;

struct StoredParam {
  std::string name;
  Shape shape;  // global
  ParamInit init;
  Sharding value;  // of the parameter, on the full mesh
  // Of its reduced gradient and optimizer moments: `value`, or (a single
  // program's ZeRO-3 parameters) the data-axis shard both are stored as.
  Sharding state;
  // ZeRO: the gradient and moments are this rank's chunk of the local block
  // (compile/zero.h); `grad_is_chunk`: the program's reduced gradient is
  // already that chunk (a single program's S(leading dim) target), else it
  // is the whole block (a pipeline's accumulator, an all-reduced gradient).
  std::optional<FlatShard> zero;
  bool grad_is_chunk = false;
  std::vector<int> pipe_ranks;  // pipeline ranks holding a copy ({0} without a pipeline)
  bool held = true;
  int64_t value_numel = 0;  // local elements of the value (0 when not held)
  int64_t state_numel = 0;  // local elements of the moments (a ZeRO chunk; 0 when not held)
  double replicas = 1;      // identical gradient copies over the whole mesh
  // Copies within one pipeline stage's mesh (replicas without the tie factor).
  double stage_replicas() const { return replicas / static_cast<double>(pipe_ranks.size()); }
  bool whole() const { return value_numel == shape.numel(); }
  // Local elements of a single program's reduced gradient.
  int64_t gradient_numel() const { return zero && !grad_is_chunk ? value_numel : state_numel; }
};

struct StagedInput {
  std::string name;
  Shape shape;  // the full batch
  DType dtype;
  // i32 ids: each must lie in [0, id_limit), the rows of the tables it
  // indexes and the classes of the losses it labels (0: unchecked);
  // `id_reader` names the op that sets the limit.
  int64_t id_limit = 0;
  std::string id_reader;
  int64_t bytes() const { return shape.numel() * static_cast<int64_t>(dtype_size(dtype)); }
};

struct RankStorage {
  std::vector<StoredParam> params;
  std::vector<StagedInput> inputs;  // the full batch the task fills, by name
  // Host buffers (bytes): the full input batch, the largest ZeRO chunk sent to
  // the parameter all-gather, one sharded tensor gathered whole, and the
  // largest ZeRO block padded to whole chunks (blocks the data size does not
  // divide are padded there; a single program gathers moments there for
  // checkpoints, a pipeline into the idle gradient accumulators).
  int64_t input_staging = 0, zero_slice = 0, full_tensor = 0, zero_block = 0;
  // Pipelines: one gradient accumulator per held element (contiguous), the
  // ZeRO chunks' reduced gradients back to back, and the largest tied
  // parameter's local block (a tie sum's buffer on a rank not holding it).
  int64_t accumulator_elements = 0, zero_gradient_elements = 0, tie_scratch_elements = 0;
  // offload "optimizer": the largest update slot (a held parameter's local
  // value, or its ZeRO chunk); the pinned staging holds that many elements
  // for the gradient and, unless offload "weights" keeps the value on the
  // host already, as many for the value.
  int64_t offload_staging_elements = 0;
  int offload_staging_buffers = 0;
  int64_t value_bytes() const;     // held parameters
  int64_t state_bytes() const;     // one optimizer moment (ZeRO: this rank's chunks)
  int64_t gradient_bytes() const;  // a single program's reduced gradients
};

// Reads everything from `compiled` (plan-only or run); allocates nothing.
RankStorage rank_storage(const CompiledRank& compiled);

}  // namespace tessel
