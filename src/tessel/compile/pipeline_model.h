// A rank's share of a pipelined model: its stages, compiled, and the
// executor that runs the schedule over them.
//
// The mesh's `pipe` axis (if any) numbers the pipeline ranks; every other
// axis forms the stage mesh each stage is laid out on, with the config's
// layout, exactly as a whole model would be without pipelining. The model is
// built for one micro-batch (batch / microbatches rows), partitioned into
// pipe x chunks stages (passes/pipeline_stages.h), and this rank's stages
// are lowered to its stage-mesh block with parameter gradients left partial
// on the data axis, so micro-batches accumulate locally and the engine
// (train/pipeline_engine.h) reduces once per step. A forward-only copy
// evaluates. With no `pipe` axis and several micro-batches this is plain
// gradient accumulation.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/compile/config.h"
#include "tessel/compile/distributed.h"
#include "tessel/compile/zero.h"
#include "tessel/passes/pipeline_stages.h"
#include "tessel/runtime/pipeline_executor.h"
#include "tessel/runtime/transfer_staging.h"
#include "tessel/schedule/schedule.h"
#include "tessel/sharding/lower.h"

namespace tessel {

// True when the config asks for a pipeline or gradient accumulation.
bool uses_pipeline(const TrainConfig& config, const Mesh& mesh);

// Every parameter of the model with where it lives.
struct PipelineParam {
  std::string name;
  Shape shape;  // global
  ParamInit init;
  std::vector<int> pipe_ranks;  // the pipeline ranks whose stages read it (ascending)
  Sharding sharding;            // on the full mesh (B on the pipe axis)
  // ZeRO 1/2: its optimizer state and reduced gradient are this flat shard
  // of its local block over the data axis (axis on the full mesh).
  std::optional<FlatShard> zero;
  bool held = false;  // this rank holds it
};

// What a pipeline's compile builds before it lowers anything: the model, the
// partition and every stage's graph. Independent of the mesh, layout, rank and
// ZeRO stage, so the planner and memory predictions over many ranks build it once.
struct PipelineGraphs {
  Graph forward;  // one micro-batch, training
  StagePartition partition;
  std::vector<StageGraph> train, eval;
  double flops_per_step = 0;
  std::vector<int64_t> stage_parameters;
};
// PipelineGraphs by (recompute, batch, micro-batches, stages, boundaries),
// for compiles of one model config; not thread-safe. Plan-only compiles with a
// cache also reuse the evaluation stages' arena sizes (all a plan reads of them),
// by stage, stage mesh, layout and rank; such a model has no evaluation programs.
struct PipelineGraphCache {
  std::map<std::string, std::shared_ptr<const PipelineGraphs>> graphs;
  std::map<std::string, size_t> eval_arena_bytes;
};

class PipelineModel {
 public:
  // The share of this process's rank, ready to bind and run.
  PipelineModel(const TrainConfig& config, DistributedContext& ctx, bool plan_only = false);
  // Any rank's share, offline (no MPI): `ctx` may be null when `plan_only`
  // (memory plans compiled, nothing allocated; dry runs and inspect).
  // `cache` (optional) shares the stage graphs with other compiles of the
  // same model config.
  PipelineModel(const TrainConfig& config, const Mesh& mesh, int rank, DistributedContext* ctx,
                bool plan_only, PipelineGraphCache* cache = nullptr);

  // Plan-only: the same compile under another ZeRO stage, which changes only
  // where each parameter's optimizer state lives, not the stage programs.
  // Throws as the constructor does for a stage it cannot take.
  void set_zero(int zero);

  std::optional<int> pipe_axis() const { return pipe_axis_; }  // none without a pipe axis
  int pipe_rank() const { return pipe_rank_; }
  const Mesh& stage_mesh() const { return stage_mesh_; }
  const Schedule& schedule() const { return schedule_; }
  const StagePartition& partition() const { return partition_; }
  const std::vector<PipelineParam>& params() const { return params_; }
  const PipelineParam* param(const std::string& name) const;
  // Parameters each stage reads (a tied one counts on every stage reading it).
  const std::vector<int64_t>& stage_parameters() const { return stage_parameters_; }
  // This rank's stages (global stage graphs and their lowering).
  struct LocalStage {
    StageGraph graph;
    LocalGraph local;
    StageGraph eval_graph;
    LocalGraph eval_local;
    int instances = 0;
    size_t arena_bytes = 0;        // per instance: what a micro-batch in flight keeps
    size_t phase_local_bytes = 0;  // shared by the instances: within-phase temporaries
    size_t offload_bytes = 0;      // per instance: offloaded activations, pinned host
    size_t eval_arena_bytes = 0;
  };
  const std::vector<LocalStage>& stages() const { return stages_; }
  // This rank's compiled stage programs (training and evaluation), until
  // bind() hands them to the executors; a plan-only model keeps them (the
  // planner's cost model reads their instructions).
  const std::vector<PipelineStage>& compiled_stages() const { return train_stages_; }
  // The mesh axis name the batch is split over on the stage mesh ("" if none).
  const std::string& data_axis() const { return data_axis_; }

  // Binds the programs: `param(name)` is the storage of a held parameter,
  // `grad(name)` its gradient accumulator, `staging(name)` the full batch of
  // an input (tokens, targets), from which each micro-batch's rows and this
  // rank's block are copied. `on_step` runs at each optimizer-step action.
  using Lookup = std::function<float*(const std::string&)>;
  void bind(const Lookup& param, const Lookup& grad, Lookup staging,
            PipelineExecutor::OnStep on_step);
  PipelineExecutor& executor() { return *executor_; }
  // Mean loss over the batch's micro-batches, on every rank (collective).
  double run_step();
  const PipelineExecutor::StepOutcome& last_outcome() const { return last_outcome_; }
  // Evaluation runs the batch as the training's micro-batches, one forward
  // through every stage at a time, so its arena is one micro-batch's.
  int eval_microbatches() const { return static_cast<int>(config_.microbatches); }
  // Forward of one micro-batch (consecutive rows of the batch, as in
  // training); its mean loss on every rank (collective).
  double evaluate(int microbatch);
  // After evaluate(m), on the ranks of the last stage: copies this rank's
  // block of the logits to `local`, with their global shape and sharding
  // (full mesh), and returns true; elsewhere false.
  bool eval_logits(Shape* shape, Sharding* sharding, std::vector<float>* local);

  // Sum over this rank's stages of instances x arena plus the shared
  // phase-local region (training), and of the eval arenas.
  size_t arena_bytes() const;
  size_t eval_arena_bytes() const;
  double flops_per_step() const { return flops_per_step_; }
  // Converts a stage-mesh sharding to the full mesh (B on the pipe axis).
  Sharding on_full_mesh(const Sharding& s) const;

 private:
  void check_zero(int zero) const;
  void assign_zero_state();  // params_' zero for config_.zero
  double share_loss(double local_sum);
  void feed(const LocalStage& st, bool eval, int microbatch, Program& program);
  PipelineStage compile(const LocalStage& st, int chunk, bool eval);
  // The constructor's steps, in order.
  void set_stage_mesh(const Mesh& mesh, int rank);    // pipe axis, stage mesh, rank and layout
  void collect_params(const PipelineGraphs& graphs);  // params_, with the ranks holding each
  // Lowers and compiles this rank's chunk `chunk` (training and evaluation):
  // its graphs moved from `owned` where built here, else copied from `graphs`.
  void compile_chunk(int chunk, int stage_count, const PipelineGraphs& graphs,
                     PipelineGraphs* owned, PipelineGraphCache* cache);

  TrainConfig config_;
  DistributedContext* ctx_;
  std::optional<int> pipe_axis_;
  int pipe_rank_ = 0, pipe_size_ = 1, stage_rank_ = 0;
  Mesh mesh_, stage_mesh_;  // the full mesh, and one stage's (without the pipe axis)
  Layout stage_layout_;
  std::string data_axis_;
  Schedule schedule_, eval_schedule_;
  int eval_microbatch_ = 0;  // the micro-batch evaluate() feeds
  StagePartition partition_;
  std::vector<PipelineParam> params_;
  std::vector<int64_t> stage_parameters_;
  std::vector<LocalStage> stages_;
  std::vector<PipelineStage> train_stages_, eval_stages_;  // until bind() hands them over
  std::unique_ptr<TransferStaging> transfer_staging_;      // collectives staged, with a pipe axis
  std::unique_ptr<PipelineExecutor> executor_, eval_executor_;
  double flops_per_step_ = 0;
  bool plan_only_ = false;
  Lookup staging_;
  std::vector<float> feed_block_;  // this rank's block of an input, on its way to a program
  PipelineExecutor::StepOutcome last_outcome_;
};

}  // namespace tessel
