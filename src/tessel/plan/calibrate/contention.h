// Is this machine busy? `tessel calibrate` refuses to cache a profile
// measured under contention, and `tessel plan` checks a cached profile
// against a quick probe (docs/usage.md).
//
// Two signs of contention while calibrating: the load average (the first
// field of /proc/loadavg, read before and after measuring) and the spread
// between repeats of the single-core FMA probe (at the start, after the
// compute phase, at the end). The load not calibrate's own (the load minus
// the threads calibrate runs: 0 before it starts; after, all of them, an
// upper bound of its share of a one-minute average) must fit in the cores it
// leaves free (cores - threads) plus `load_margin` (0.5: a shell's or a
// daemon's short-lived work); more is busy. Calibrating on every core of a
// 2-core machine, a load above 0.5 before is busy. Repeats of the probe differing by more than
// `spread` (max / min - 1) are noisy. Before `tessel plan` prices anything
// with a profile of this machine, it measures the single-core FMA peak for
// about 50 ms and compares it with the profile's: differing by more than
// `mismatch` (|probe / profile - 1|), the profile does not match the machine
// now (busy now, or busy when calibrated).
//
// TESSEL_CONTENTION=KEY=VALUE[,KEY=VALUE...] overrides them, for tests that
// simulate contention without loading the machine: loadavg=PATH (a file in
// /proc/loadavg's format), load_margin=X, spread=X, mismatch=X and
// probe_gflops=X (the plan probe's result, not measured).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tessel::plan {

struct ContentionSettings {
  std::string loadavg = "/proc/loadavg";
  double load_margin = 0.5;
  double spread = 0.15;
  double mismatch = 0.20;
  std::optional<double> probe_gflops;
};

// The defaults, overridden by TESSEL_CONTENTION (throws on a malformed one).
ContentionSettings contention_settings();

// The one-minute load average from a file in /proc/loadavg's format;
// nullopt when it cannot be read.
std::optional<double> read_load_average(const std::string& path);

// "" when `load`, less `own_load` (calibrate's own: 0 before it starts,
// `threads` after), fits in the cores that calibrating on `threads` threads
// leaves free plus `load_margin`; else why the machine is busy ("load 9.50 on
// 2 cores (...)").
std::string busy_by_load(double load, double own_load, int threads, int cores, double load_margin);

// max / min - 1 over repeats of one measurement (0 for fewer than two).
double spread_of(const std::vector<double>& repeats);

// "" when a probe of `probe_gflops` agrees with the profile's
// `profile_gflops` within `mismatch`; else the warning.
std::string probe_mismatch(double probe_gflops, double profile_gflops, double mismatch,
                           const std::string& profile_path);

// The plan probe: the single-core FMA peak in GFLOP/s (about 50 ms), or
// the simulated value of TESSEL_CONTENTION's probe_gflops.
double quick_probe_gflops(const ContentionSettings& settings);

}  // namespace tessel::plan
