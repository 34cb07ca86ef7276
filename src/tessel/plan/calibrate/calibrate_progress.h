// How far non-blocking communication gets while a rank computes, measured
// the way the runtime drives it (part of `tessel calibrate`, on 2 ranks).
//
// The runtime starts a gradient bucket's all-reduce (MPI_Iallreduce, in
// place) and a pipeline send (MPI_Isend) and then tests the pending requests
// between instructions (runtime/program.cc, pipeline_executor.cc); Open MPI
// over shared memory has no progress thread, so the transfer moves only
// inside those tests, and its copies run on the ranks' own cores. This
// measures, for one payload (8 MiB; --quick 4 MiB), with a compute loop cut
// into chunks of about 0.25 ms (an instruction's length) and a test before
// each chunk:
//   - C: the chunks alone; A: the non-blocking all-reduce alone (started,
//     then waited for); B: the blocking all-reduce;
//   - T: the all-reduce started, the chunks with a test before each, then
//     the wait; n: the tests until it completed;
//   - all_reduce_overlap = clamp((C + A - T) / A, 0, 1): the share of its
//     time that did not add to the rank's; all_reduce_poll_bytes = bytes / n;
//     nonblocking_factor = A / B;
//   - the same for a send from rank 0 while rank 1 waits in its receive:
//     send_overlap and send_poll_bytes (rank 0's tests).
// Each figure is the median of 3 runs, every run started after a barrier;
// rank 0's figures are returned (both ranks run the same loop).
#pragma once

#include <functional>

#include "tessel/comm/communicator.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

// REQUIRES: `world` has exactly 2 ranks; `barrier` synchronises them.
CommProgress measure_progress(Communicator& world, const std::function<void()>& barrier,
                              bool quick);

}  // namespace tessel::plan
