#include "tessel/plan/calibrate/calibrate_check.h"

#include <omp.h>

#include <algorithm>
#include <map>

#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/ir/op_table.h"
#include "tessel/plan/calibrate/instruction_timing.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::plan {
ProgramCheck check_program(const TrainConfig& config, const HardwareModel& hw, int threads,
                           int repeats) {
  TS_CHECK(repeats >= 1, "calibrate --check: repeats must be positive, got ", repeats);
  const Precision precision = config.precision == "bf16" ? Precision::kBF16 : Precision::kF32;
  hw.peak_flops(precision, threads);  // a precision the profile lacks: say so before timing
  TrainConfig c = config;
  if (c.recompute == "auto") c.recompute = "none";
  const std::unique_ptr<TimedProgram> timed = timed_training_program(c);
  Program& program = *timed->program;
  const Graph& g = program.graph();
  const std::vector<Program::InstructionInfo> list = program.instruction_info();
  const std::map<ValueId, double> typical = median_instruction_seconds(program, threads, repeats);

  const CostOptions options{.threads = threads, .precision = precision};
  std::map<std::string, CheckedKind> by_kind;
  ProgramCheck out;
  for (size_t i = 0; i < list.size(); ++i) {
    const Program::InstructionInfo& ins = list[i];
    const auto timed_ins = typical.find(ins.node);
    if (timed_ins == typical.end()) continue;  // bucket members (none here), views the hook skips
    const std::string kind = instruction_kind(g, ins);
    const double predicted = instruction_seconds(hw, g, ins, options);
    const kernels::EinsumPlan* e = ins.einsum;
    const double flops = e ? 2.0 * e->batch * e->m * e->n * e->k : 0;
    const double measured = timed_ins->second;
    CheckedKind& k = by_kind[kind];
    k.kind = kind;
    k.count += 1;
    k.measured_s += measured;
    k.predicted_s += predicted;
    k.gemm_flops += flops;
    out.measured_s += measured;
    out.predicted_s += predicted;
    if (ins.einsum) {
      out.einsum_measured_s += measured;
      out.einsum_predicted_s += predicted;
    }
  }
  for (auto& [name, k] : by_kind) out.kinds.push_back(k);
  std::sort(out.kinds.begin(), out.kinds.end(),
            [](const CheckedKind& a, const CheckedKind& b) { return a.measured_s > b.measured_s; });
  return out;
}

}  // namespace tessel::plan
