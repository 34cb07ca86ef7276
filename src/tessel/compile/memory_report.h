// Memory a training run will use on each rank, predicted before the run.
//
// Built offline for every rank of the mesh from the same lowering and static
// memory plan the run uses (nothing is allocated, no MPI): parameters and
// optimizer state live outside the arena; the arena holds activations,
// gradients (outputs), collective/einsum scratch and (ZeRO-3) the parameters
// gathered on use, at its planned peak.
// ZeRO's chunk buffers and the host buffers (input staging, the full-tensor
// buffer of checkpoints) come from the same shardings. Each part is counted
// where the engine allocates it: device memory (RankMemory::device(), what
// a GPU must hold and what the backend measures) or host memory. The total is the peak of the
// tensor storage a real run allocates (AlignedBuffer's counters), which the
// run measures and reports beside it, with its peak RSS (VmHWM).
//
// Not modelled (RSS only, not tensor storage): the program's code and
// libraries (oneDNN, Open MPI, their internal buffers), the data set in
// memory, graphs and plans, transient std::vectors (evaluation's gathered
// logits for accuracy tasks), and resuming from a checkpoint
// (Trainer::load_checkpoint reads the files whole and holds a full copy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/compile/config.h"
#include "tessel/sharding/lower.h"

namespace tessel {

// Host buffers the engine holds besides parameters, moments and arenas
// (sized by rank_storage.h, which the engine allocates from).
struct HostBufferBytes {
  int64_t input_staging = 0;  // the full input batch (each rank copies its block in)
  int64_t full_tensor = 0;    // one sharded tensor gathered whole (checkpoints, initialisation)
  // Rank 0 with asynchronous periodic saves: a whole copy of the model state
  // (parameters, and AdamW moments), written by the background thread.
  int64_t checkpoint_snapshot = 0;
  // offload "optimizer" (pinned): AdamW's moments, and the staging of one
  // update slot's gradient (and value, unless the weights are offloaded).
  int64_t optimizer = 0, offload_staging = 0;
  // offload "weights" (pinned): the f32 parameters the programs read in place.
  int64_t weights = 0;
  // offload "activations" (pinned): the training programs' host plans.
  int64_t activations = 0;
  // collectives "staged" (pinned): each mesh axis's staged communicator,
  // and a pipeline's transfer mirrors.
  int64_t comm_staging = 0;
  int64_t total() const {
    return input_staging + full_tensor + checkpoint_snapshot + optimizer + offload_staging +
           weights + activations + comm_staging;
  }
};

// One rank's tensor storage by kind, and by where it lives: device() is what
// the engine allocates in the backend's device memory (MemorySpace::kDevice,
// measured by Backend::space_stats), `host` the rest.
struct RankMemory {
  int rank = 0;
  int64_t parameters = 0;
  int64_t optimizer = 0;   // AdamW moments on the device (0 for SGD, or offloaded: host)
  int64_t arena = 0;       // training step: activations + gradients + scratch, planned peak
  int64_t gradients = 0;   // of which gradient outputs (live to the step's end)
  int64_t eval_arena = 0;  // the evaluation program's own arena
  // ZeRO: the updated chunk sent to the parameter all-gather and a padded
  // block (moments gathered for checkpoints, padding).
  int64_t zero_slice = 0, zero_block = 0;
  // The backend's own device memory: CUDA's cuBLASLt workspace; 0 on the CPU.
  int64_t device_runtime = 0;
  HostBufferBytes host;
  // Pipelines and micro-batches: gradient accumulators outside the arena,
  // and the arena is one per micro-batch in flight on each stage.
  int64_t accumulators = 0;
  int64_t weight_copies = 0;           // asynchronous schedules: stashed or predicted weights
  std::vector<int> stages, in_flight;  // this rank's stages, and instances of each
  std::vector<int64_t> stage_arena;    // one instance's arena per stage (its stash)
  std::vector<int64_t> stage_shared;   // per stage: temporaries shared by its instances
  // All of these are live at once from the first step on (the full-tensor
  // buffer during a checkpoint save, which comes after the last step), so
  // each sum is a peak: device() of the backend's device memory, total() of
  // the bytes allocation_stats() counts on the CPU, where device memory is
  // host memory (device_runtime is 0 there).
  int64_t device() const {
    return parameters + optimizer + arena + eval_arena + zero_slice + zero_block + accumulators +
           weight_copies + device_runtime;
  }
  int64_t total() const { return device() + host.total(); }
};

// Whether the asynchronous periodic saves hold a host snapshot in this run:
// a periodic save falls in (first_step, steps].
bool holds_save_snapshot(const TrainConfig& c);

// Every rank's memory, each from its plan-only compile (compile_rank.h).
std::vector<RankMemory> predict_memory(const TrainConfig& config);
struct CompiledRank;
// One rank's memory, from its compile (what that rank's engine allocates:
// rank_storage.h).
// For a pipeline, `as_schedule` (synchronous, the compiled chunks and
// micro-batches) counts the micro-batches in flight under that schedule
// instead of the compiled one: the stage programs are the same.
struct Schedule;
RankMemory predict_rank_memory(const CompiledRank& compiled, const Schedule* as_schedule = nullptr);

// Peak resident set size of this process so far, from /proc/self/status; -1
// where unavailable.
int64_t peak_rss_bytes();

std::string format_bytes(int64_t bytes);

// "2GiB", "512MiB", "64KiB", "1000" (bytes). Throws naming the text.
int64_t parse_bytes(const std::string& text);

// The figure a memory limit applies to: device memory on a GPU (device()),
// all tensor storage on the CPU (total()).
int64_t limited_bytes(const RankMemory& m, const std::string& device);

// Before any compute: if `config.memory_limit` is set and some rank's
// predicted memory (limited_bytes) exceeds it, throws with that rank's breakdown and the
// settings (higher ZeRO stage, block recomputation) that would fit.
// REQUIRES: `config.recompute` is not "auto" (resolve it first).
void check_memory_limit(const TrainConfig& config);

// "parameters 41.17 MiB, optimizer state ..., training arena ... (of which
// gradients ...), evaluation arena ...[, gradient accumulators ...]".
std::string memory_breakdown(const RankMemory& m);

}  // namespace tessel
