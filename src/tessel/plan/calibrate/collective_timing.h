// Timing collectives on a Communicator: shared by `tessel calibrate` and
// bench/mpi/collectives_bench.cc, so both measure the same thing.
#pragma once

#include <cstdint>
#include <functional>

#include "tessel/comm/communicator.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

// Runs one collective over `comm` with a payload of `floats` elements in
// HardwareModel's convention (comm/communicator.h): all-reduce, reduce-scatter
// and all-to-all the full buffer, all-gather one rank's shard. `in` holds the
// full buffer (floats, or floats * size() for all-gather's output); `out` as
// large. All-reduce works in place on `in`. REQUIRES: for reduce-scatter and
// all-to-all, floats divisible by comm.size().
void run_collective(Communicator& comm, CollectiveKind kind, float* in, float* out, int64_t floats);

// Median wall time of `iterations` calls of `fn` after one warm-up call, each
// started right after `barrier()` (all ranks enter together).
double median_seconds(const std::function<void()>& barrier, int iterations,
                      const std::function<void()>& fn);

}  // namespace tessel::plan
