// The one way a config becomes one rank's program.
//
// compile_rank() runs the compile sequence, in this order and nowhere else:
// build the model's graph -> autodiff (VJP table) -> recompute policy ->
// ZeRO targets -> layout lowering with boxing (the rank's local graph, every
// collective a node) -> static memory plan -> Program. A pipeline (a `pipe`
// mesh axis, or several micro-batches) takes the same steps per stage inside
// PipelineModel: partition into stage graphs, each with its backward, then
// lowering on the stage mesh. Every caller uses it: the trainer (kRun, with
// its process's communicators), the dry run and `--memory-limit`
// (memory_report.h), `inspect` and the planner (kPlanOnly), so the program a
// plan or a prediction describes is exactly the program a run executes.
//
// kPlanOnly allocates no tensor storage and touches no data or MPI: it is
// the whole compile minus the arenas, for any rank of any mesh, offline.
// Invariant: a CompiledRank's config has `recompute` resolved (never "auto").
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tessel/compile/config.h"
#include "tessel/compile/model_registry.h"
#include "tessel/compile/pipeline_model.h"
#include "tessel/compile/recompute_choice.h"
#include "tessel/passes/recompute_policy.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/lower.h"
#include "tessel/sharding/mesh.h"

namespace tessel {

class DistributedContext;

enum class CompileMode { kRun, kPlanOnly };

// The training graph (forward + gradients) of a config's model, with the
// config's recompute policy applied (never "auto"); needs no data.
struct TrainingGraph {
  Graph graph;
  TaskGraph outputs;
  std::vector<ValueId> grads;   // one per graph parameter, in order
  double recomputed_flops = 0;  // forward FLOPs the recompute policy adds per step
};
TrainingGraph build_training_graph(const TrainConfig& config, int64_t batch);
// Applies a recompute policy to a training graph built with none.
void apply_recompute(TrainingGraph& t, const RecomputePolicy& policy);

// How the training graph is lowered for `config.zero` (compile/zero.h): the
// ZeRO targets, and the loss as the forward/backward phase boundary.
LoweringOptions training_lowering(const TrainingGraph& t, const TrainConfig& config,
                                  const Layout& layout, const Mesh& mesh);

// The config's layout on `mesh` ('layout', or the defaults for the mesh's
// axis names) with its per-value 'shard' overrides.
Layout layout_for(const TrainConfig& config, const Mesh& mesh);

// `recompute: auto` resolved against the config's memory limit (every rank
// makes the same choice offline); nullopt when the config names a policy.
// On return config.recompute holds the policy to compile.
std::optional<RecomputeChoice> resolve_recompute(TrainConfig& config);

// One global graph lowered to a rank and compiled.
struct CompiledProgram {
  Graph global;
  LocalGraph local;
  std::unique_ptr<Program> program;
  TaskGraph outputs;  // global ids
  // The program's outputs, as global ids (loss, logits if wanted, gradients).
  std::vector<ValueId> wanted;
};

struct CompiledRank {
  TrainConfig config;  // recompute resolved
  Mesh mesh;
  Layout layout;
  int rank = 0;
  CompileMode mode = CompileMode::kPlanOnly;
  std::optional<RecomputeChoice> recompute_choice;  // when the config said "auto"
  double flops_per_step = 0;                        // whole model, every rank together
  // One program per phase of a step (no pipe axis, one micro-batch):
  // eval.program is null when a plan-only compile took eval_arena_bytes
  // from its GraphCache (an earlier compile differing only in recompute).
  CompiledProgram train, eval;
  size_t eval_arena_bytes = 0;  // the evaluation program's arena
  std::vector<ValueId> grads;   // global ids, aligned with train.global.params()
  double recomputed_flops = 0;
  // Pipelines and micro-batches: this rank's stages, compiled.
  std::unique_ptr<PipelineModel> pipeline;
  bool pipelined() const { return pipeline != nullptr; }
};

// Graphs shared between compiles of one config that differ only in mesh,
// layout, rank or ZeRO stage (the planner, predict_memory over every rank).
// Keyed by the recompute policy and the batch; not thread-safe.
struct GraphCache {
  std::map<std::tuple<std::string, int64_t>, TrainingGraph> training;
  PipelineGraphCache pipelines;  // pipelines: the stage graphs (pipeline_model.h)
  // Plan-only: the evaluation program's arena by mesh, layout, rank, ZeRO
  // stage, batch and precision (it does not depend on the recompute policy).
  std::map<std::string, size_t> eval_arena_bytes;
};

// The compile options a config's number-format keys set (precision,
// bf16_activations, tp_comm_precision), the rest default: the one place
// they are read, for compile_rank, the pipeline stages and the planner's
// timed programs (plan/calibrate/instruction_timing.h).
CompileOptions precision_compile_options(const TrainConfig& config);

// Validates the layout against the model, then compiles. kRun needs `ctx`
// (this process's rank, mesh and communicators: mesh and rank must be its
// own) and allocates the arenas; kPlanOnly takes ctx = nullptr. Throws
// naming dims and axes on a layout the model cannot take.
CompiledRank compile_rank(const TrainConfig& config, const Mesh& mesh, const Layout& layout,
                          int rank, CompileMode mode, DistributedContext* ctx = nullptr,
                          GraphCache* cache = nullptr);

}  // namespace tessel
