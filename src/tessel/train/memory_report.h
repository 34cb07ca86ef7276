// Memory a training run will use on each rank, predicted before the run.
//
// Built offline for every rank of the mesh from the same lowering and static
// memory plan the run uses (nothing is allocated, no MPI): parameters and
// optimizer state live outside the arena; the arena holds activations,
// gradients (outputs) and collective/einsum scratch at its planned peak.
// The process's measured peak RSS (VmHWM) is reported beside the prediction
// after a real run; the difference is the runtime's own footprint (code,
// libraries, the data set, MPI buffers), which the plan does not model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/train/config.h"

namespace tessel {

struct RankMemory {
  int rank = 0;
  int64_t parameters = 0;
  int64_t optimizer = 0;   // AdamW moments (0 for SGD)
  int64_t arena = 0;       // training step: activations + gradients + scratch, planned peak
  int64_t gradients = 0;   // of which gradient outputs (live to the step's end)
  int64_t eval_arena = 0;  // the evaluation program's own arena
  // Pipelines and micro-batches: gradient accumulators outside the arena,
  // and the arena is one per micro-batch in flight on each stage.
  int64_t accumulators = 0;
  int64_t weight_copies = 0;           // asynchronous schedules: stashed or predicted weights
  std::vector<int> stages, in_flight;  // this rank's stages, and instances of each
  std::vector<int64_t> stage_arena;    // one instance's arena per stage
  int64_t total() const {
    return parameters + optimizer + arena + eval_arena + accumulators + weight_copies;
  }
};

std::vector<RankMemory> predict_memory(const TrainConfig& config);

// Peak resident set size of this process so far, from /proc/self/status; -1
// where unavailable.
int64_t peak_rss_bytes();

std::string format_bytes(int64_t bytes);

// "2GiB", "512MiB", "64KiB", "1000" (bytes). Throws naming the text.
int64_t parse_bytes(const std::string& text);

// Before any compute: if `config.memory_limit` is set and some rank's
// predicted memory exceeds it, throws with that rank's breakdown and the
// settings (higher ZeRO stage, block recomputation) that would fit.
// REQUIRES: `config.recompute` is not "auto" (resolve it first).
void check_memory_limit(const TrainConfig& config);

// "parameters 41.17 MiB, optimizer state ..., training arena ... (of which
// gradients ...), evaluation arena ...[, gradient accumulators ...]".
std::string memory_breakdown(const RankMemory& m);

}  // namespace tessel
