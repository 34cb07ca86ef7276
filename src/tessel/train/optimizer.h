// Optimizers over a ParamStore: AdamW (decoupled weight decay) and SGD, with
// global-norm gradient clipping and a warmup + cosine learning-rate schedule.
//
// Gradients are read where the compiled program left them; the update is a
// fused single pass per parameter, run by the backend (kernels/optimizer.h
// on the CPU). Moments are
// allocated on the first step and reused after. The global norm sums squares
// in double in a fixed order, so a run is bitwise reproducible.
#pragma once

#include <functional>
#include <vector>

#include "tessel/backend/backend.h"
#include "tessel/compile/config.h"
#include "tessel/train/param_store.h"

namespace tessel {

// Linear warmup from 0 over warmup_steps, then cosine decay to min_lr at `steps`.
double learning_rate(const TrainConfig& config, int64_t step);

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

// Applies one update. `step` counts from 0 and sets the learning rate;
// AdamW's bias correction uses step + 1, or `updates` (the count including
// this one) when several updates share a step (asynchronous pipelines).
UpdateStats apply_update(const TrainConfig& config, Backend& backend,
                         const std::vector<UpdateSlot>& slots, int64_t step,
                         const GlobalSumOfSquares& global_sum, int64_t updates = 0);

}  // namespace tessel
