// The training loop's engine, on one process or on every rank of a mesh.
//
// Builds the task's global training graph (forward + autodiff), lowers it to
// this rank's local graph for the mesh and layout (sharding/lower.h: every
// collective is a node), compiles that once into a Program over one static
// arena, and steps: fill the full batch, copy this rank's shard of it in,
// run, apply the optimizer to the local parameter shards. A forward-only
// program (no dropout) evaluates on held-out data. Parameters start from the
// same full values on every layout (Philox keyed by global index), so any
// mesh trains to the same losses and weights as one process.
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
#include "tessel/train/checkpoint/shard_load.h"
#include "tessel/train/optimizer.h"
#include "tessel/train/param_store.h"
#include "tessel/train/task.h"
#include "tessel/train/weight_versions.h"

namespace tessel {

struct StepResult {
  int64_t step = 0;  // the step just taken, from 0
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
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
  EvalResult evaluate();

  const TrainConfig& config() const { return config_; }
  const Task& task() const { return *task_; }
  DistributedContext& distributed() { return *ctx_; }
  bool is_root() const { return ctx_->is_root(); }
  // This rank's parameter shards (the full parameters on a single process).
  ParamStore& params() { return *params_; }
  int64_t steps_done() const { return step_; }
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
  const Program& train_program() const;
  const LocalGraph& train_lowering() const { return compiled_.train.local; }
  int64_t items_per_step() const { return config_.batch * task_->items_per_row(); }
  // The pipeline (a `pipe` mesh axis or several micro-batches), or nullptr.
  PipelineModel* pipeline() { return pipe_.get(); }
  // Per world rank, over the steps after the first: the measured bubble
  // fraction (1 - compute time / the pipeline's makespan) next to the
  // schedule's, simulated with unit costs F = BI = BW = 1. Collective.
  struct PipelineStats {
    std::vector<double> measured_bubble, theoretical_bubble;
    std::vector<int> pipe_rank;
    std::vector<int> weight_versions;  // most distinct versions held at once (asynchronous)
    int steps = 0;
  };
  PipelineStats pipeline_stats();
  // Writes the Chrome trace of every step's actions (config `trace`);
  // collective, the root writes.
  void write_trace(const std::string& path);

 private:
  std::vector<UpdateSlot> update_slots();
  int64_t state_numel(size_t param_index) const;
  void gather_updated_slices();
  void feed(CompiledProgram& c, Split split, int64_t index);
  CheckpointSource checkpoint_source();
  CheckpointSource pipeline_checkpoint_source();
  // The pipeline path (trainer_pipeline.cc).
  void init_pipeline();
  void pipeline_update(int microbatch);
  void init_asynchronous();
  void asynchronous_update(int microbatch);
  void reduce_accumulated_gradients(float scale);
  void init_pipeline_zero();
  void reduce_scatter_accumulated_gradients();
  void gather_pipeline_slices();
  StepResult pipeline_step();
  EvalResult pipeline_evaluate();
  void pipeline_load(const std::string& dir);
  // This rank's block of a tensor of `shape` laid out by `s` (sharded checkpoint loads).
  TensorBlock block_of(const Shape& shape, const Sharding& s) const;
  int64_t pipeline_parameter_count() const;

  TrainConfig config_;
  std::optional<RecomputeChoice> recompute_choice_;
  std::unique_ptr<DistributedContext> ctx_;
  std::unique_ptr<Task> task_;
  CompiledRank compiled_;       // this rank's programs (compile/compile_rank.h)
  std::vector<ValueId> grads_;  // global ids, aligned with params_->entries()
  std::unique_ptr<ParamStore> params_;
  std::vector<Sharding> param_sharding_;
  std::vector<Sharding> state_sharding_;  // gradients and optimizer state
  int zero_axis_ = -1;                    // mesh axis ZeRO shards over, or -1
  HostBufferBytes host_bytes_;
  AlignedBuffer slice_buffer_;    // ZeRO 1, 2: this rank's updated slice, sent to the all-gather
  std::vector<double> replicas_;  // ranks holding identical copies of each parameter shard
  std::vector<const float*> grad_ptrs_;
  std::vector<UpdateSlot> slots_;
  std::map<std::string, Tensor> staging_;  // full inputs, by name
  double global_flops_ = 0;
  int64_t step_ = 0;
  // Pipeline path: the model's stages on this rank, one gradient accumulator
  // per held parameter (contiguous, reduced over data in one call) and the
  // last update's statistics.
  std::unique_ptr<PipelineModel> pipe_;
  AlignedBuffer grad_accumulators_;
  std::map<std::string, float*> accumulator_of_;
  AlignedBuffer tie_scratch_;
  AlignedBuffer zero_grads_;  // ZeRO on a pipeline: the gradient slices, back to back
  UpdateStats last_update_;
  // Asynchronous schedules: the weight copies micro-batches run on, updates
  // applied on this rank, micro-batch gradients since the last update.
  std::unique_ptr<WeightVersions> versions_;
  int64_t updates_ = 0;
  int64_t updates_per_step_ = 0;  // this rank's optimizer steps per trainer step
  int last_stepped_microbatch_ = -1;
  std::vector<double> stage_replicas_;              // replicas_ without the tied-parameter factor
  double busy_seconds_ = 0, makespan_seconds_ = 0;  // summed over steps after the first
  int timed_steps_ = 0;
};

}  // namespace tessel
