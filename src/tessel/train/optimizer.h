// Optimizers over a ParamStore: AdamW (decoupled weight decay) and SGD, with
// global-norm gradient clipping and a learning-rate schedule (linear warm-up,
// then cosine, linear, constant or warmup-stable-decay).
//
// Gradients are read where the compiled program left them; the update is a
// fused single pass per parameter, run by the backend (kernels/optimizer.h
// on the CPU), or, with offload "optimizer", by the host on copies of the
// gradient and value in pinned staging (the same kernel, so the same bits);
// with offload "weights" too, on the value in place.
// Moments are allocated on the first step (in moment_space) and reused
// after. The global norm sums squares
// in double in a fixed order, so a run is bitwise reproducible.
#pragma once

#include <functional>
#include <vector>

#include "tessel/backend/backend.h"
#include "tessel/compile/config.h"
#include "tessel/train/param_store.h"

namespace tessel {

// Linear warm-up from 0 over warmup_steps, then `lr_schedule`: cosine or
// linear decay to min_lr at `steps`, constant lr, or wsd (lr until the last
// decay_fraction of the steps, then linear to min_lr at `steps`).
double learning_rate(const TrainConfig& config, int64_t step);

// The weight decay of one parameter: weight_decay, or 0 for a rank-1 one
// (biases, norm gains) unless decay_norms_and_biases.
float weight_decay_of(const TrainConfig& config, const ParamEntry& param);

struct UpdateStats {
  double grad_norm = 0;  // before clipping
  double lr = 0;
};

// Sum of squares of the whole gradient, given each slot's local sum of
// squares (on a mesh: weighted by replication and reduced over the ranks).
using GlobalSumOfSquares = std::function<double(const std::vector<double>& local)>;

// What one parameter's update touches on this rank: `n` elements of the
// parameter and its gradient (the whole local parameter, or under ZeRO the
// chunk whose gradient shard this rank holds). AdamW moments live in
// `state`, allocated on first use with `moments` elements (ZeRO pads the last
// chunks: at least `n`; 0: `n`).
struct UpdateSlot {
  float* param;
  const float* grad;
  int64_t n;
  ParamEntry* state;
  int64_t moments = 0;
};

// Where AdamW's moments live: pinned host memory with offload "optimizer",
// else device memory.
MemorySpace moment_space(const TrainConfig& config);
// Where the f32 weights live: pinned host memory with offload "weights"
// (the programs read them in place), else device memory.
MemorySpace weight_space(const TrainConfig& config);

// offload "optimizer": pinned host buffers of `capacity` floats
// (RankStorage::offload_staging_elements), where one slot's gradient and,
// unless the weights live on the host already, its value are copied for the
// host's update (`value` is null then).
struct OffloadStaging {
  float* value = nullptr;
  float* grad = nullptr;
  int64_t capacity = 0;
};

// Applies one update. `step` counts from 0 and sets the learning rate;
// AdamW's bias correction uses step + 1, or `updates` (the count including
// this one) when several updates share a step (asynchronous pipelines).
// `lr`, when > 0, replaces the schedule's rate (Trainer::set_lr).
// `staging` is required with offload "optimizer".
UpdateStats apply_update(const TrainConfig& config, Backend& backend,
                         const std::vector<UpdateSlot>& slots, int64_t step,
                         const GlobalSumOfSquares& global_sum, int64_t updates = 0, double lr = 0,
                         const OffloadStaging& staging = {});

}  // namespace tessel
