// Fault injection for testing recovery:
// TESSEL_FAULT_INJECT=rank=R,step=S,point=P[,lose=1][,after_file=PATH]
// makes world rank R SIGKILL itself when it reaches point P of step S (from 0):
//   forward    as the step's forward starts (a pipeline: its first forward action)
//   backward   as the step's backward starts (after the loss is computed;
//              a pipeline: its first backward action)
//   collective on entering the gradient-norm all-reduce, with the other ranks inside it
//   optimizer  after this rank's AdamW update, before the ZeRO parameter gather
//   save       during the periodic save after step S (rank 0: the checkpoint
//              is written but `latest` not yet moved to it; others: before the gathers)
// With `,lose=1` the rank is also declared lost before it dies: it creates
// the file `rank-R` in $TESSEL_LOST_DIR (set by `tessel launch`; an error if
// absent), which a launcher with --elastic reads as "this rank's device is
// gone" and relaunches on the ranks that are left.
// With `,after_file=PATH` (PATH without commas) the rank, at the fault point,
// first waits until PATH exists (a poll every 10 ms), so a test can order the
// fault after another event (e.g. a standby job's readiness marker). If PATH
// has not appeared within kFaultAfterFileTimeoutS, the rank fails with exit
// status 1 and a message naming the file instead of the injected kill.
// It fires only on a job's first attempt: `tessel launch` sets TESSEL_ATTEMPT
// (0, 1, ...) and a value other than 0 disarms it. A malformed value is an
// error naming the variable, raised when the trainer starts.
#pragma once

#include <cstdint>
#include <string>

namespace tessel {

inline constexpr double kFaultAfterFileTimeoutS = 60;

enum class FaultPoint { kForward, kBackward, kCollective, kOptimizer, kSave };

// Reads the environment once (throws on a malformed TESSEL_FAULT_INJECT).
void arm_fault_injection(int world_rank);
// Whether `point` fires on this rank at some step (to install hooks only when needed).
bool fault_armed(FaultPoint point);
// SIGKILLs this process if the armed fault is (point, step) on this rank.
void fault_point(FaultPoint point, int64_t step);

// The after_file of the armed fault ("" if none or not armed on this rank).
const std::string& fault_after_file();

// Waits (a poll every 10 ms) until `path` exists, for at most `timeout_s`;
// whether it appeared.
bool wait_for_file(const std::string& path, double timeout_s);

}  // namespace tessel
