// The single-process training loop's engine.
//
// Builds the task's training graph, appends its gradient graph (autodiff),
// compiles it once into a Program over one static arena, and steps: fill the
// batch for the step, run, apply the optimizer. A separate forward-only
// program (no dropout) evaluates on held-out data; both read the same
// parameters. Deterministic: the same config gives bitwise-identical losses.
#pragma once

#include <memory>
#include <vector>

#include "tessel/runtime/program.h"
#include "tessel/train/config.h"
#include "tessel/train/optimizer.h"
#include "tessel/train/param_store.h"
#include "tessel/train/task.h"

namespace tessel {

struct StepResult {
  int64_t step = 0;  // the step just taken, from 0
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
};

class Trainer {
 public:
  // Validates the config and loads the data before allocating anything.
  explicit Trainer(const TrainConfig& config);

  StepResult step();
  EvalResult evaluate();

  const TrainConfig& config() const { return config_; }
  const Task& task() const { return *task_; }
  ParamStore& params() { return *params_; }
  int64_t steps_done() const { return step_; }
  void set_steps_done(int64_t step) { step_ = step; }
  // FLOPs of one training step (forward + backward), counted from the graph.
  double flops_per_step() const { return train_->flops_per_run(); }
  size_t arena_bytes() const { return train_->arena_bytes(); }
  const Program& train_program() const { return *train_; }
  int64_t items_per_step() const { return config_.batch * task_->items_per_row(); }

 private:
  TrainConfig config_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<ParamStore> params_;
  std::unique_ptr<Program> train_, eval_;
  TaskGraph train_out_, eval_out_;
  std::vector<ValueId> grad_of_param_;  // aligned with params_->entries()
  std::vector<const float*> grad_ptrs_;
  int64_t step_ = 0;
};

// Builds the training graph (forward + gradients) of a config's model; needs
// no data. Used by the trainer, `tessel inspect` and tests.
struct TrainingGraph {
  Graph graph;
  TaskGraph outputs;
  std::vector<ValueId> grads;  // one per graph parameter, in order
};
TrainingGraph build_training_graph(const TrainConfig& config, int64_t batch);

}  // namespace tessel
