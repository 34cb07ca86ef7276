// Internal to plan/model: a pipeline rank's data-axis work overlapped with
// its schedule (CostOptions::overlap_data_parallel), as FSDP's
// asynchronous gradient reduction and parameter prefetch run it.
//
// Per model chunk of the rank: its gradients are complete at the end of its
// last backward action, and its reduction (reduce-scatter or all-reduce)
// starts then on the data axis's one channel, chunks in that order, behind
// whatever the rank runs next; what runs past the schedule's makespan is
// exposed. After the update the chunks' parameters are gathered (ZeRO) one
// after another in the order of their first forward in the next step, each
// needed by that forward: the step is delayed by the largest lateness (a
// rank whose first forward waits for upstream stages hides its gathers in
// that wait). Invariants: exposed <= the same work run after the schedule
// (chunks that finish at the makespan and a first forward at 0 give
// exactly that); never negative.
#pragma once

#include <vector>

namespace tessel::plan {

struct ChunkDataWork {
  double grads_ready_s = 0;    // end of the chunk's last backward (weight) action
  double reduce_s = 0;         // its gradients' reduction over the data axis
  double first_forward_s = 0;  // start of its first forward in the schedule
  double gather_s = 0;         // its parameters' gather after the update (0 without ZeRO)
};

struct OverlappedDataWork {
  double comm_s = 0;            // the reductions and gathers, all of them
  double reduce_exposed_s = 0;  // of the reductions, past the makespan
  double gather_exposed_s = 0;  // of the gathers, the delay of the next step's forwards
};

OverlappedDataWork overlapped_data_work(std::vector<ChunkDataWork> chunks, double makespan_s);

}  // namespace tessel::plan
