// How the CLI's OpenMP threads wait between parallel regions.
//
// GNU OpenMP (libgomp, which oneDNN and Tessel's kernels run on) spins a
// waiting thread for about 300,000 iterations before it sleeps. On a core
// of its own that saves a wake-up; on cores shared with other processes
// (more ranks x threads than cores, other jobs) the spinning thread burns
// the time slice the busy one needs, and a 2-thread step takes 2-3x longer
// (docs/performance.md, "OpenMP waiting"). libgomp reads its settings from
// the environment once, when it is loaded, before main runs, so the CLI
// sets them by starting itself again once with the setting in its
// environment. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT always wins.
#pragma once

namespace tessel::cli {

// The spin count the CLI runs with unless the user set one.
inline constexpr const char* kGompSpinCount = "10000";

// Call first thing in main: returns if OMP_WAIT_POLICY or GOMP_SPINCOUNT is
// in the environment (the user's, or set by this function before it
// started the program again); otherwise sets GOMP_SPINCOUNT and replaces
// the process with a fresh copy of itself (same pid, arguments and
// environment plus that variable). If that fails it returns, and the
// program runs with libgomp's default.
void exec_with_openmp_wait_policy(char** argv);

}  // namespace tessel::cli
