// How much slower one rank's training program runs while the other rank of
// the node is busy (part of `tessel calibrate`, on its 2-rank launch).
//
// The profile's GEMM grid and kernel rates are one process's, with the other
// cores idle. Two ranks on two cores share the L3 and the memory bandwidth,
// and a rank waiting in a blocking MPI call (the runtime's pipeline receive,
// with OMPI_MCA_mpi_yield_when_idle=1) spins on its core polling shared
// memory. measure_co_run() times a real training program (the kernel rates'
// one-block GPT, kernel_rate_config()) on rank 0 in three settings, in
// rounds that alternate them so that drift hits all three alike:
//   - alone: rank 1 sleeps (nanosleep, no MPI call) until rank 0 is done;
//   - polling: rank 1 waits in a blocking receive for rank 0's message;
//   - computing: both ranks run the program at the same time;
// and returns the ratios of the medians: computing = T_both / T_alone,
// polling = T_poll / T_alone (CoRun, hardware_model.h). The cost model
// multiplies a rank's kernels by these while the other ranks of its node
// compute or wait (cost_model.h).
#pragma once

#include <functional>

#include "tessel/comm/communicator.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

// REQUIRES: `world` has exactly 2 ranks; `barrier` synchronises them.
CoRun measure_co_run(Communicator& world, const std::function<void()>& barrier, bool quick);

}  // namespace tessel::plan
