// Internal to plan/model: a pipelined configuration's step, by running its
// schedule's action lists on the stages' phase costs (schedule_check.h's
// simulator), with the co-run correction (co_run.h); cost_model.h states the model.
#pragma once

#include <vector>

#include "tessel/plan/model/co_run.h"
#include "tessel/plan/model/program_simulator.h"
#include "tessel/schedule/schedule.h"

namespace tessel::plan {

// A pipelined configuration: phase times of every representative's stages
// drive the schedule simulator; then each rank's per-step reductions and update.
// `sim` times the stages as if each rank had its own core; `post` (its
// share of a core applied) the per-step work after the schedule, when every
// rank computes at once. Ranks sharing a core fill each other's bubbles: the
// makespan is at least the cores' work, share x the mean busy time.
// `co`: the co-run correction (co_run.h).
std::vector<RankStep> pipeline_steps(const std::vector<CompiledRank>& reps,
                                     const Schedule& schedule, const Simulator& sim,
                                     const Simulator& post_sim, double share,
                                     const PipelineCoRun& co, StagePhaseMemo* memo);

}  // namespace tessel::plan
