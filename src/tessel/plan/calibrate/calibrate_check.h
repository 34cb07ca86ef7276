// A config's training program timed instruction by instruction against what
// the cost model charges each instruction on a hardware model (`tessel
// calibrate --check CONFIG`): the way to find which kernels a profile
// mis-prices, by measuring the real runtime instead of fitting step times.
//
// check_program() builds the config's single-process training program (its
// recompute policy applied, the whole batch, no mesh), as kernel_rates.h
// does, binds parameters and runs it `repeats` times after a warm-up, timing
// each instruction between the program's progress-hook calls. Per
// instruction the median of the runs counts (instruction_timing.h: what a
// step typically spends there); instructions are grouped by kind
// (instruction_kind: an einsum by its GEMM, anything else by its op name).
// The prediction is the cost model's own per-instruction charge
// (einsum_seconds, HardwareModel::kernel_seconds) at one rank of `threads`
// threads with a core of its own, in the config's precision (bf16 needs a
// profile with bf16 figures, checked before anything runs).
#pragma once

#include <string>
#include <vector>

#include "tessel/compile/config.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

struct CheckedKind {
  std::string kind;  // "einsum 8x128x128x64" (batch x m x n x k), "softmax", ...
  int count = 0;     // instructions of the kind in the program
  double measured_s = 0, predicted_s = 0;  // summed over them, one run
  double gemm_flops = 0;                   // einsums: FLOPs, summed
};

struct ProgramCheck {
  std::vector<CheckedKind> kinds;  // largest measured time first
  double measured_s = 0, predicted_s = 0;
  double einsum_measured_s = 0, einsum_predicted_s = 0;
};

ProgramCheck check_program(const TrainConfig& config, const HardwareModel& hw, int threads,
                           int repeats);

}  // namespace tessel::plan
