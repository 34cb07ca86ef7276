// The co-run correction of a pipeline's timeline: a rank's actions run
// slower while the other ranks of its node compute (HardwareModel::co_run,
// measured by `tessel calibrate`; 1 on a cluster).
//
// With `overlap` (a pipeline alone on its node, each rank on its own core)
// an action's factor is polling + (computing - polling) x o, o the share of
// its time during which another pipeline rank runs an action in the
// previous pass of the simulation (the others wait in their blocking
// receives, polling, the rest of the time): the schedule is simulated with
// factor 1, then again with each action's factor from the pass before,
// until the makespan settles (at most kCoRunPasses corrections). Without it
// every action takes `uniform`.
#pragma once

#include <map>
#include <tuple>

#include "tessel/schedule/schedule_check.h"

namespace tessel::plan {

struct PipelineCoRun {
  double uniform = 1;
  bool overlap = false;
  double computing = 1, polling = 1;
};

inline constexpr int kCoRunPasses = 4;

// An action of one pipeline rank: (rank, kind, micro-batch, chunk).
using CoRunKey = std::tuple<int, int, int, int>;
inline CoRunKey co_run_key(int rank, const Action& a) {
  return CoRunKey{rank, static_cast<int>(a.kind), a.microbatch, a.chunk};
}

// Each action's factor under `co.overlap`, from the overlaps of `timeline`.
std::map<CoRunKey, double> co_run_factors(const SimulatedTimeline& timeline, int ranks,
                                          const PipelineCoRun& co);

}  // namespace tessel::plan
