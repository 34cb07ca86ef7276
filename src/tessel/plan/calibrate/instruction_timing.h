// Timing a training program instruction by instruction, for the profile's
// kernel rates (kernel_rates.h) and `calibrate --check` (calibrate_check.h).
// The program is a config's single-process training step (the loss and
// every gradient) with every parameter bound to a buffer of 0.02s and token
// ids 0: the timing does not depend on the values. Each instruction's time
// runs from the progress hook before it to the hook's next call (before the
// next instruction, or after the last one).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessel/compile/compile_rank.h"
#include "tessel/runtime/program.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::plan {

struct TimedProgram {
  TrainingGraph training;
  std::vector<AlignedBuffer> params;  // bound to `program`
  std::unique_ptr<Program> program;
};

// Builds `config`'s training program (in its number format:
// precision_compile_options) with its parameters bound (not moved
// once built: the program holds the parameters' addresses).
std::unique_ptr<TimedProgram> timed_training_program(const TrainConfig& config);

// Runs `program` repeats + 1 times at `threads` OpenMP threads (the first
// run warms up) and returns each timed instruction's node with its median
// time in seconds (the upper median for an even count). The median, not the
// fastest run: on this kind of machine each instruction's fastest of a few
// runs is about 10% below its typical time, so a sum of fastest runs
// undercounts a real step by as much; the sum of medians matches the
// program's own median run time within 1-2%. Restores the thread count.
std::map<ValueId, double> median_instruction_seconds(Program& program, int threads, int repeats);

// The clock once `program`'s device has finished what was queued on it
// (Backend::synchronize: nothing to wait for on the CPU), for timing it.
double device_done_seconds(Program& program);

// What an instruction is, for grouping times: an einsum by its GEMM,
// "einsum BxMxNxK" (batch x m x n x k), anything else by its op name.
std::string instruction_kind(const Graph& graph, const Program::InstructionInfo& ins);

}  // namespace tessel::plan
