// The training loop: data, optimizer, checkpoints and metrics over one
// engine (train/engine.h), on one process or on every rank of a mesh.
//
// The constructor validates the config, sets up the mesh, compiles this
// rank's program(s) once (compile/compile_rank.h) and hands them to the
// engine: a single program, or a pipeline's stages. A step fills the full
// batch from the task and has the engine run it; the engine calls back into
// the trainer's optimizer. Parameters start from the same full values on
// every layout (Philox keyed by global index), so any mesh trains to the
// same losses and weights as one process.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "tessel/compile/compile_rank.h"
#include "tessel/compile/config.h"
#include "tessel/compile/distributed.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/pipeline_model.h"
#include "tessel/compile/recompute_choice.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/lower.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/engine.h"
#include "tessel/train/optimizer.h"
#include "tessel/train/param_store.h"
#include "tessel/train/pipeline_engine.h"
#include "tessel/train/task.h"

namespace tessel {

struct StepResult {
  int64_t step = 0;  // the step just taken, from 0
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  double data_ms = 0;   // filling the batch (the data loader's or the caller's share of the step)
  nlohmann::json data;  // Task::train_batch_info: which samples the batch held (or null)
};

class Trainer {
 public:
  // Validates the config, sets up the mesh (MPI under mpirun), resolves
  // `recompute: auto`, checks the layout against the model and the memory
  // limit, then loads the data — all before allocating the arena or running
  // anything.
  explicit Trainer(const TrainConfig& config);
  ~Trainer();

  // How `recompute: auto` was resolved (config().recompute holds the
  // choice); nullptr when the config named a policy.
  const RecomputeChoice* recompute_choice() const {
    return recompute_choice_ ? &*recompute_choice_ : nullptr;
  }

  StepResult step();
  // One step on a batch the caller fills instead of the data set: `fill` is
  // called once per model input (inputs()), with its full-batch staging
  // tensor (every rank gets the whole batch and takes its own block).
  using BatchFiller = std::function<void(const std::string& name, Tensor& staged)>;
  StepResult step(const BatchFiller& fill);
  // The model's inputs as a step stages them: names, shapes, dtypes.
  const std::map<std::string, Tensor>& inputs() const { return engine_->staged_inputs(); }
  EvalResult evaluate();

  // The learning rate of the following steps; 0 restores the schedule's.
  // Saved in checkpoints (the manifest's lr_schedule.override) and restored
  // by load_checkpoint; asynchronous pipelines' weight prediction (XPipe)
  // still uses the schedule's rate.
  void set_lr(double lr);
  // With `on`, each optimizer update copies the gradients it receives
  // (before clipping): this rank's part of each parameter, as the update
  // sees it (its shard; under ZeRO 1-2 its slice, flat). gradients() holds
  // the last update's, by parameter name.
  void keep_gradients(bool on) { keep_gradients_ = on; }
  const std::map<std::string, std::vector<float>>& gradients() const { return gradients_; }

  const TrainConfig& config() const { return config_; }
  const Task& task() const { return *task_; }
  DistributedContext& distributed() { return *ctx_; }
  Backend& backend() { return *backend_; }  // where the programs run
  bool is_root() const { return ctx_->is_root(); }
  // This rank's parameter shards (the full parameters on a single process).
  ParamStore& params() { return engine_->params(); }
  int64_t steps_done() const { return step_; }
  // Intra-op threads of this rank: 'threads', else its share of the host's
  // cores (train/threads.h).
  int threads() const { return threads_; }
  void set_steps_done(int64_t step) { step_ = step; }
  // Checkpoints hold full tensors whatever the layout, so a run can resume on
  // another mesh. Both are collective; only the root writes. A save gathers
  // one sharded tensor at a time into one buffer (HostBufferBytes::full_tensor).
  // `load_checkpoint` restores the step (and with it the data position, the
  // learning-rate schedule and every random stream: checkpoint/run_state.h),
  // so the next step() continues the saved run exactly.
  void save_checkpoint(const std::string& dir);
  void load_checkpoint(const std::string& dir);
  // The state copied into host buffers at this step boundary (collective;
  // the root keeps the bytes), to be written later off the training thread:
  // tessel::save_checkpoint(dir, config(), snapshot.source(), step, true).
  void snapshot_checkpoint(CheckpointSnapshot& snapshot);
  // Allocates those host buffers ahead of the first snapshot (no collectives).
  void reserve_snapshot(CheckpointSnapshot& snapshot);
  // The manifest's "state" for the current step.
  nlohmann::json run_state() const;

  // Of the whole model (all shards).
  int64_t parameter_count() const;
  double flops_per_step() const { return global_flops_; }
  // Model-state bytes on this rank (optimizer state counted once allocated,
  // i.e. after the first step).
  struct ModelStateBytes {
    int64_t parameters = 0, gradients = 0, optimizer = 0;
  };
  ModelStateBytes model_state_bytes() const;
  size_t arena_bytes() const;
  size_t eval_arena_bytes() const;
  // The single training program (not for pipelines or micro-batches: see pipeline()).
  Program& train_program();
  int64_t items_per_step() const { return config_.batch * task_->items_per_row(); }
  // The pipeline (a `pipe` mesh axis or several micro-batches), or nullptr.
  PipelineModel* pipeline() { return engine_->compiled().pipeline.get(); }
  // Per world rank: measured and theoretical bubble fractions (empty
  // without a pipeline). Collective.
  using PipelineStats = tessel::PipelineStats;  // train/pipeline_engine.h
  PipelineStats pipeline_stats();
  // Writes the Chrome trace of every step's actions (config `trace`);
  // collective, the root writes.
  void write_trace(const std::string& path);

  // Where this rank's start-up went, in seconds (measured, steady clock):
  // the mesh (MPI_Init and the communicators), the data set, the compile,
  // the engine (its allocations), and the checkpoint load of a resume.
  struct StartupSeconds {
    double mesh = 0, data = 0, compile = 0, engine = 0, load = 0;
  };
  const StartupSeconds& startup_seconds() const { return startup_; }

 private:
  CheckpointSource checkpoint_source();
  PipelineEngine* pipeline_engine() const;
  // What this rank and the ranks sharing its host will hold, from a plan-only
  // compile, against the host's memory (host_memory.h): throws before
  // anything is allocated. Collective over the world.
  void check_fits_host() const;

  TrainConfig config_;
  std::optional<RecomputeChoice> recompute_choice_;
  Backend* backend_ = nullptr;  // config_.device's (backend/backend.h)
  std::unique_ptr<DistributedContext> ctx_;
  std::unique_ptr<Task> task_;
  std::unique_ptr<Engine> engine_;  // this rank's compiled step
  double global_flops_ = 0;
  int64_t step_ = 0;
  int threads_ = 1;
  double lr_override_ = 0;
  bool keep_gradients_ = false;
  std::map<std::string, std::vector<float>> gradients_;
  StartupSeconds startup_;
};

}  // namespace tessel
