// SIGINT / SIGTERM during `tessel train`: the first one asks the training
// loop to stop after the current step (it then saves the checkpoint and
// exits non-zero with a clear line); a second one ends the process at once
// with that signal's default action.
//
// No handler runs on a thread that computes. oneDNN's JIT GEMM kernels (the
// f32 matmul on AVX2 and AVX-512 in Debian's oneDNN 2.7) point the stack
// pointer into a heap workspace while they run, so a signal handler invoked
// there has its frame written over heap memory (oneDNN issue 4845, fixed
// upstream in 2026); `tessel train` aborted with "double free or corruption"
// about once in 30 SIGTERMs. install_stop_handlers() therefore blocks both
// signals in the calling thread, which every thread it starts afterwards
// (OpenMP's, MPI's, the checkpoint writer) inherits, and one thread of its
// own receives them with sigwait(). Call it before the process starts other
// threads: a thread started earlier keeps the signals unblocked and the
// default action (the process ends) if the kernel picks it. The receiving
// thread is named kStopSignalThreadName; while it waits in sigwait() the
// kernel shows the two signals as unblocked for it alone.
#pragma once

namespace tessel::cli {

inline constexpr const char* kStopSignalThreadName = "stop-signals";

// Blocks SIGINT and SIGTERM in the calling thread and starts the thread that
// waits for them (idempotent).
void install_stop_handlers();
// The signal received since install (0 if none).
int stop_signal();
// "SIGINT", "SIGTERM" or "a signal".
const char* signal_name(int sig);

}  // namespace tessel::cli
