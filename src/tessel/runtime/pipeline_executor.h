// Runs one rank's pipeline action list (schedule/schedule.h) over compiled
// stage programs.
//
// Each model chunk this rank holds is a stage: one local program (forward,
// backward-input and backward-weight phases, see passes/pipeline_stages.h)
// compiled into as many instances as the schedule keeps micro-batches in
// flight on it, each instance with its own arena, all bound to the same
// parameters. A micro-batch takes a free instance at its first action and
// gives it back after its last backward phase, once its sends completed.
// Activations and gradients cross stages shard to shard: every rank of a
// stage sends its local block to the rank with the same data/model
// coordinates on the next stage, over the `pipe` axis communicator, tagged
// by (micro-batch, stage, direction) so messages match whatever their order.
// Sends never block (an activation's completes before its micro-batch's
// backward, whose values may take its bytes; a gradient's before the
// instance is reused); receives do (under the comm watchdog). Parameter gradients of every
// micro-batch are added into the stage's accumulators by its programs as they are computed
// (CompileOptions::accumulated_outputs). With a TransferStaging (a pipe
// communicator that reaches host memory only), each send is copied into its
// pinned mirror first and each receive lands in pinned memory and is copied
// in. Every action is timed for traces and
// bubble fractions. Nothing is allocated per step once compiled.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tessel/comm/communicator.h"
#include "tessel/runtime/program.h"
#include "tessel/schedule/schedule.h"

namespace tessel {

struct PipelineStage {
  int stage = 0;
  int chunk = 0;
  std::vector<std::unique_ptr<Program>> instances;  // same program, one per in-flight micro-batch
  // Local value ids of the program (the same in every instance).
  std::vector<ValueId> activations_in, activations_out, gradients_in, gradients_out;
  std::vector<ValueId> param_grads;
  // Aligned with param_grads, bound as the programs' accumulators; zeroed by
  // the caller per step.
  std::vector<float*> accumulators;
  std::optional<ValueId> loss;    // last stage only
  std::optional<ValueId> logits;  // last stage of an evaluation, if asked for
};

// One timed action of one rank.
struct TraceEvent {
  int kind = 0;                   // ActionKind
  std::optional<int> microbatch;  // none: an optimizer step covering all micro-batches
  std::optional<int> stage;       // none: an optimizer step
  double start = 0, end = 0;      // seconds since the executor was created
};

class TransferStaging;

class PipelineExecutor {
 public:
  // `pipe`: the pipe-axis communicator (nullptr for a pipeline of one rank);
  // `staging` (not owned, may be null): where transfers are staged.
  // `feed(stage, microbatch, program)`: writes the batch inputs the stage's
  // program reads (tokens on the first, targets on the last stage).
  using Feed = std::function<void(int stage, int microbatch, Program& program)>;
  // Called for each kOptimizerStep action (asynchronous schedules step per
  // micro-batch; synchronous ones once at the end).
  using OnStep = std::function<void(int microbatch)>;
  PipelineExecutor(const Schedule& schedule, int pipe_rank, std::vector<PipelineStage> stages,
                   Communicator* pipe, Feed feed, OnStep on_step,
                   const TransferStaging* staging = nullptr);

  struct StepOutcome {
    double loss_sum = 0;      // sum of micro-batch losses (last stage only)
    double seconds = 0;       // wall time of the action list
    double busy_seconds = 0;  // of which compute (F, B, BI, BW)
    double compute_end = 0;   // end of the last compute action, seconds after the start
  };
  // Runs the whole action list once.
  StepOutcome run();
  // The training step dropout masks are keyed by (each action also tells its
  // program the micro-batch): set once per step, before run().
  void set_step(int64_t step);

  std::vector<PipelineStage>& stages() { return stages_; }
  const std::vector<TraceEvent>& trace() const { return trace_; }
  bool tracing = false;
  // Weight management of asynchronous schedules (train/weight_versions.h):
  // called with the stage's index in stages() before a forward, before a
  // backward (B or BI), and when a micro-batch leaves its instance.
  struct WeightHooks {
    std::function<void(size_t stage, int microbatch, Program&)> before_forward, before_backward,
        released;
  };
  void set_weight_hooks(WeightHooks hooks) { hooks_ = std::move(hooks); }
  // Trace times count from here (steady clock seconds); ranks that set it
  // right after a collective share a time origin.
  void set_epoch(double seconds) { epoch_ = seconds; }

 private:
  PipelineStage& stage_of_chunk(int chunk);
  Program& acquire(PipelineStage& s, int microbatch);
  void release(PipelineStage& s, int microbatch);
  int tag_base(int microbatch, int stage, int direction) const;
  void receive(Program& p, const std::vector<ValueId>& values, const Action& a, int tag);
  // Sends `values`, numbered from `first` among the stage's sent values.
  void send(size_t stage, size_t instance, const std::vector<ValueId>& values, size_t first,
            const Action& a, int tag, std::vector<std::unique_ptr<CommRequest>>& pending);
  // Every stage's shared bf16 weight copies are stale (Program::weights_changed).
  void weights_changed();
  void poll_sends();

  Schedule schedule_;
  int pipe_rank_;
  std::vector<PipelineStage> stages_;
  Communicator* pipe_;
  const TransferStaging* staging_;
  Feed feed_;
  OnStep on_step_;
  // Per stage: micro-batch -> instance (-1 none); per instance: busy flag and pending sends.
  std::vector<std::vector<int>> instance_of_;
  std::vector<std::vector<bool>> busy_;
  std::vector<std::vector<std::vector<std::unique_ptr<CommRequest>>>> pending_;
  WeightHooks hooks_;
  std::vector<bool> last_use_;  // per action: the micro-batch's last on its stage
  std::vector<TraceEvent> trace_;
  double epoch_ = 0;
};

// Number of micro-batches of `chunk` a rank's action list keeps in flight at
// once (forward run, last backward phase not yet): the instances it needs.
int instances_needed(const Schedule& schedule, int pipe_rank, int chunk);

}  // namespace tessel
