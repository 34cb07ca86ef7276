// Memory a training run will use on each rank, predicted before the run.
//
// Built offline for every rank of the mesh from the same lowering and static
// memory plan the run uses (nothing is allocated, no MPI): parameters and
// optimizer state live outside the arena; the arena holds activations,
// gradients (outputs), collective/einsum scratch and (ZeRO-3) the parameters
// gathered on use, at its planned peak.
// The process's measured peak RSS (VmHWM) is reported beside the prediction
// after a real run; the difference is the runtime's own footprint (code,
// libraries, the data set, MPI buffers), which the plan does not model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/sharding/lower.h"
#include "tessel/train/config.h"

namespace tessel {

struct RankMemory {
  int rank = 0;
  int64_t parameters = 0;
  int64_t optimizer = 0;   // AdamW moments (0 for SGD)
  int64_t arena = 0;       // training step: activations + gradients + scratch, planned peak
  int64_t gradients = 0;   // of which gradient outputs (live to the step's end)
  int64_t eval_arena = 0;  // the evaluation program's own arena
  int64_t total() const { return parameters + optimizer + arena + eval_arena; }
};

std::vector<RankMemory> predict_memory(const TrainConfig& config);

// Host buffers the trainer holds besides parameters, moments and arenas,
// sized from the shardings alone, so that the trainer allocates and the dry
// run predicts the same bytes.
struct HostBufferBytes {
  int64_t input_staging = 0;  // the full input batch (each rank copies its block in)
  int64_t zero_slice = 0;     // stages 1, 2: the updated slice sent to the parameter all-gather
  int64_t full_tensor = 0;    // one sharded tensor gathered whole (checkpoints, initialisation)
};
// `training` is the global training graph with one gradient per parameter in
// `grads`; `local` its lowering for the rank. `moments`: AdamW moments exist.
HostBufferBytes host_buffer_bytes(const Graph& training, const std::vector<ValueId>& grads,
                                  const LocalGraph& local, const Mesh& mesh, bool moments);

// Peak resident set size of this process so far, from /proc/self/status; -1
// where unavailable.
int64_t peak_rss_bytes();

std::string format_bytes(int64_t bytes);

// "2GiB", "512MiB", "64KiB", "1000" (bytes). Throws naming the text.
int64_t parse_bytes(const std::string& text);

// Before any compute: if `config.memory_limit` is set and some rank's
// predicted memory exceeds it, throws with that rank's breakdown and the
// settings (higher ZeRO stage, block recomputation) that would fit.
void check_memory_limit(const TrainConfig& config);

}  // namespace tessel
