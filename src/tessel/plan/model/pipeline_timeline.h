// Internal to plan/model: a pipelined configuration's step, by running its
// schedule's action lists on the stages' phase costs (schedule_check.h's
// simulator), with the co-run correction; cost_model.h states the model.
#pragma once

#include <vector>

#include "tessel/plan/model/program_simulator.h"
#include "tessel/schedule/schedule.h"

namespace tessel::plan {

// Co-run: a rank's actions run slower while the other ranks of its
// node are busy. With `co.overlap` (a pipeline alone on its node, each rank
// on its own core) an action's factor is polling + (computing - polling) x
// o, o the share of its time during which another pipeline rank runs an
// action in the previous pass of the simulation (the others wait in their
// blocking receives, polling, the rest of the time): the schedule is
// simulated with factor 1, then again with each action's factor from the
// pass before, until the makespan settles (at most kCoRunPasses
// corrections). Without it every action takes `co.uniform`.
struct PipelineCoRun {
  double uniform = 1;
  bool overlap = false;
  double computing = 1, polling = 1;
};

// A pipelined configuration: phase times of every representative's stages
// drive the schedule simulator; then each rank's per-step reductions and update.
// `sim` times the stages as if each rank had its own core; `post` (its
// share of a core applied) the per-step work after the schedule, when every
// rank computes at once. Ranks sharing a core fill each other's bubbles: the
// makespan is at least the cores' work, share x the mean busy time.
// `co`: the co-run correction above.
std::vector<RankStep> pipeline_steps(const std::vector<CompiledRank>& reps,
                                     const Schedule& schedule, const Simulator& sim,
                                     const Simulator& post_sim, double share,
                                     const PipelineCoRun& co, StagePhaseMemo* memo);

}  // namespace tessel::plan
