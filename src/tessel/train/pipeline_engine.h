// The engine of a pipelined run: a `pipe` mesh axis, several micro-batches,
// or both (compile/pipeline_model.h). Each rank holds the parameters its
// stages read; a step zeroes the gradient accumulators, runs the schedule
// (the stages add every micro-batch's gradients), and at the schedule's
// optimizer step sums the accumulators over the data axis in one all-reduce
// and over the pipeline ranks sharing a tied parameter, then has the
// optimizer update what it holds. Asynchronous schedules update at several
// points of a step, on stashed or predicted weights (weight_versions.h).
#pragma once

#include <optional>

#include "tessel/train/engine.h"
#include "tessel/train/weight_versions.h"

namespace tessel {

// Per world rank, over the steps after the first: the measured bubble
// fraction (1 - compute time / the pipeline's makespan) next to the
// schedule's, simulated with unit costs F = BI = BW = 1.
struct PipelineStats {
  std::vector<double> measured_bubble, theoretical_bubble;
  std::vector<int> pipe_rank;
  std::vector<int> weight_versions;  // most distinct versions held at once (asynchronous)
  int steps = 0;
};

class PipelineEngine : public Engine {
 public:
  PipelineEngine(CompiledRank compiled, DistributedContext& ctx, Optimizer optimizer);

  double train_step(int64_t step) override;
  double evaluate(std::vector<float>* logits) override;
  CheckpointSource checkpoint_source(int64_t step) override;
  void load(const std::string& dir, int64_t step) override;
  int64_t gradient_bytes() const override { return storage_.value_bytes(); }
  size_t arena_bytes() const override { return model().arena_bytes(); }
  size_t eval_arena_bytes() const override { return model().eval_arena_bytes(); }

  PipelineModel& model() const { return *compiled_.pipeline; }
  PipelineStats stats();                      // collective
  void write_trace(const std::string& path);  // collective; the root writes

 private:
  void append_eval_logits(std::vector<float>& logits);  // collective
  void init_asynchronous();
  void update(int microbatch);
  void asynchronous_update(int microbatch);
  void reduce_accumulated_gradients(float scale);
  void init_zero();
  void reduce_scatter_accumulated_gradients();

  // One gradient accumulator per held parameter (contiguous, reduced over
  // data in one call), in device memory like the tie scratch and ZeRO's
  // gradient chunks: the programs add into them, communicators reduce them,
  // the backend zeroes and scales them.
  DeviceMemory grad_accumulators_;
  int64_t accumulator_elements_ = 0;
  std::map<std::string, float*> accumulator_of_;
  std::map<std::string, size_t> held_index_;  // a held parameter's index in held_
  DeviceMemory tie_scratch_;
  DeviceMemory zero_grads_;  // ZeRO: the gradient slices, back to back
  // Zeroes every accumulator.
  void zero_accumulators();
  // Asynchronous schedules: the weight copies micro-batches run on, updates
  // applied on this rank, micro-batch gradients since the last update.
  std::unique_ptr<WeightVersions> versions_;
  int64_t updates_ = 0;
  int64_t updates_per_step_ = 0;                    // this rank's optimizer steps per trainer step
  std::optional<int> last_stepped_microbatch_;      // this step's, none before the first
  double busy_seconds_ = 0, makespan_seconds_ = 0;  // summed over steps after the first
  int timed_steps_ = 0;
};

}  // namespace tessel
