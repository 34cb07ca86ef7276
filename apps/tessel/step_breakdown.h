// Where a training step's wall time goes, kind of instruction by kind
// (`tessel bench step --breakdown`), measured on the steps being timed.
//
// The training program's progress hook runs before each instruction and once
// after the last, so each instruction is timed from the hook before it to the
// next call; instructions are grouped by plan::instruction_kind (an einsum by
// its GEMM, anything else by its op name). Two more parts close each step:
// `before`, from the step's start to its first instruction (feeding the
// batch), and `after`, from the end of its last instruction to the step's end
// (waiting for gradient buckets, the gradient norm, the optimizer update,
// ZeRO's parameter gathers). So the parts add up to the steps' wall time
// exactly. A gradient bucket's start runs between instructions without a
// hook and counts in the instruction before it. One program: a pipeline runs
// several (Trainer::train_program refuses it). Each clock reading first
// waits for the device (plan::device_done_seconds; nothing to wait for on
// the CPU), so on a GPU an instruction's time is its kernels' plus one
// synchronisation.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tessel/runtime/program.h"

namespace tessel::cli {

class StepBreakdown {
 public:
  // Installs the program's progress hook (replacing any) until destroyed.
  explicit StepBreakdown(Program& program);
  ~StepBreakdown();
  StepBreakdown(const StepBreakdown&) = delete;
  StepBreakdown& operator=(const StepBreakdown&) = delete;

  // Around each timed step; the hook records nothing outside them.
  void begin_step();
  void end_step();

  // Per-step means over the timed steps, in ms: {"steps", "program_runs",
  // "step_ms_mean", "before_ms", "after_ms", "kinds": [{"kind", "count",
  // "ms"}, ...]} with the largest kind first; count is per program run, and
  // an einsum kind also has "gflops", the rate its GEMMs ran at.
  nlohmann::json to_json() const;
  // The same as a table for a person, each part's share of the step.
  std::string table() const;

 private:
  void on_progress();

  struct Kind {
    int count = 0;       // instructions of the kind in one run
    double flops = 0;    // their GEMMs' FLOPs in one run (einsums; else 0)
    double seconds = 0;  // over every timed step
  };
  Program& program_;
  std::map<std::string, Kind> kinds_;
  std::map<ValueId, Kind*> kind_of_;  // each hooked instruction's node -> its kind in kinds_
  bool timing_ = false;
  std::optional<ValueId> open_;  // the instruction being timed
  bool program_done_ = false;    // this step's program ran its last instruction
  double started_ = 0;           // when the open part began
  double before_s_ = 0, after_s_ = 0;
  int steps_ = 0, runs_ = 0;
};

}  // namespace tessel::cli
