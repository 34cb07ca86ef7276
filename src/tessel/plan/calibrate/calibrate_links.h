// The communication half of `tessel calibrate`: alpha-beta fits of every
// collective and of send/recv, measured under mpirun.
//
// measure_links() launches `mpirun -n ranks BINARY calibrate --collectives-out
// FILE` (BINARY is the tessel CLI) with the shared-memory settings the tests
// use (OMPI_MCA_btl=self,vader, yield when idle, no single-copy mechanism,
// OMP_NUM_THREADS=1; a value already in the environment wins) plus
// --allow-run-as-root when root and --oversubscribe, and reads FILE back. The
// mpirun program is $TESSEL_MPIRUN, else `mpirun` on the PATH. Under mpirun,
// measure_links_on_world() times each collective at payloads of 4 KiB to
// 8 MiB (quick: 4 KiB to 4 MiB) on the world, ping-pong send/recv between
// ranks 0 and 1 (half the round trip; 2-rank runs only), fits alpha-beta per kind
// (alpha_beta.h), on 2 ranks measures how non-blocking communication
// progresses (calibrate_progress.h) and how much slower a rank computes
// beside a busy one (calibrate_corun.h), and rank 0 writes
// {"links": [profile "links" entries], "progress": {...}, "co_run": {...}}.
#pragma once

#include <string>
#include <vector>

#include "tessel/plan/profile/machine_profile.h"

namespace tessel::plan {

struct LinkCalibration {
  std::vector<LinkFit> links;
  bool has_progress = false;  // the 2-rank launch measures it
  CommProgress progress;
  bool has_co_run = false;  // the 2-rank launch measures it
  CoRun co_run;
};
LinkCalibration measure_links(const std::string& tessel_binary, int ranks, bool quick);

// REQUIRES: launched under mpirun with at least 2 ranks.
void measure_links_on_world(const std::string& out_path, bool quick);

}  // namespace tessel::plan
