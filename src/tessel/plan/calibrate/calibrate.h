// `tessel calibrate` as a library call, the profile cache, and the entry
// point the planner uses.
//
// calibrate_machine() measures this machine (calibrate_compute.h at 1 and
// `threads` threads; calibrate_links.h on 2 ranks and, unless quick, 4
// oversubscribed ranks), saves the profile to `out` and returns it. The cache
// path is $XDG_CACHE_HOME/tessel/profile-<hash>.json (XDG_CACHE_HOME unset or
// empty: ~/.cache), the hash an FNV-1a of the CPU model and core count, so a
// different machine never reads another's profile.
#pragma once

#include <memory>
#include <string>

#include "tessel/plan/profile/hardware_model.h"
#include "tessel/plan/profile/machine_profile.h"

namespace tessel::plan {

struct CalibrateOptions {
  std::string out;            // "" = default_profile_path()
  int threads = 0;            // the largest thread count measured; 0 = every core
  bool quick = false;         // fewer shapes and sizes, 2 ranks only (a few seconds)
  std::string tessel_binary;  // the CLI that runs under mpirun; "" = this executable
  bool progress = true;       // one line per phase on stderr
  // Contention (contention.h): a busy load before measuring stops at once,
  // and a busy load after or probes spread beyond the threshold leave the
  // profile unsaved, with an error naming the load or spread and --force
  // (the file at `out` untouched). `force` saves anyway, with a warning;
  // `use_when_busy` (plan's first calibration) returns the profile
  // measured after the start, unsaved, with a warning.
  bool force = false;
  bool use_when_busy = false;
};

// "model name" from /proc/cpuinfo ("unknown CPU" if absent).
std::string cpu_model_name();
// Cores of this machine (online), whatever this process is bound to.
int core_count();
std::string default_profile_path();

MachineProfile calibrate_machine(const CalibrateOptions& options);

// The planner's hardware for this machine: the profile at `profile_path`
// when given; else the cached profile; else a fresh calibration, saved to the
// cache, announced on stderr (how long, where it goes, and `how_to_skip` when
// given), with *calibrated = true (calibrated may be null). A busy machine
// stops it before it measures (CalibrateOptions::use_when_busy otherwise).
std::unique_ptr<HardwareModel> load_or_calibrate(const std::string& profile_path, bool* calibrated,
                                                 const std::string& how_to_skip = "");

}  // namespace tessel::plan
