// The planner's exact phase for one candidate: compiled plan-only for its
// representative ranks (compile_rank) and predicted (cost_model.h).
//
// Shares compiles between candidates whose programs are the same (while
// `share`): gpipe, 1f1b and zb-h1 compile to the same stages; so do ZeRO 0,
// 1 and 2 of a pipeline (PipelineModel::set_zero) and ZeRO 1 and 2 of a
// single program (compile/zero.h). Kept compiles are dropped when the mesh
// changes. Predictions are identical either way (a test compares them).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessel/plan/model/cost_model.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

class ExactCoster {
 public:
  ExactCoster(const HardwareModel& hw, const CostOptions& options, bool share)
      : hw_(hw), options_(options), share_(share) {}
  // Throws as compile_rank does (a layout or schedule the model cannot take).
  StepPrediction cost(const TrainConfig& config);

 private:
  struct Kept {
    std::vector<CompiledRank> ranks;
    StagePhaseMemo phases;
  };
  Kept& kept(const TrainConfig& key, const std::vector<int>& reps, GraphCache* graphs);

  const HardwareModel& hw_;
  CostOptions options_;
  bool share_;
  GraphCache graphs_;  // training and stage graphs, evaluation arenas (keyed by recompute)
  // Compiles kept for the current mesh, by config: pipelines (as 1f1b,
  // ZeRO 0) and single programs under ZeRO 1 and 2 (as ZeRO 1), with their
  // stages' phase costs once predicted (the same under every schedule and
  // ZeRO stage).
  std::map<std::string, Kept> kept_;
  std::string kept_mesh_;
};

}  // namespace tessel::plan
