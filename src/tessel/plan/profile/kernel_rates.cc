#include "tessel/plan/profile/kernel_rates.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "tessel/compile/compile_rank.h"
#include "tessel/ir/op_table.h"
#include "tessel/plan/calibrate/instruction_timing.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::plan {

TrainConfig kernel_rate_config(bool quick) {
  TrainConfig c;
  c.n_layer = 1;
  c.n_head = 6;
  c.d_model = 384;
  c.context = 128;
  c.batch = quick ? 4 : 8;
  return c;
}

std::vector<KernelRate> measure_kernel_rates(const std::vector<int>& thread_counts, bool quick) {
  const std::unique_ptr<TimedProgram> timed = timed_training_program(kernel_rate_config(quick));
  Program& program = *timed->program;
  const Graph& g = program.graph();
  const int repeats = quick ? 3 : 5;
  std::vector<KernelRate> rates;
  for (int threads : thread_counts) {
    const std::map<ValueId, double> typical = median_instruction_seconds(program, threads, repeats);
    std::map<std::string, std::pair<double, double>> by_op;  // bytes, seconds
    for (const auto& [node, seconds] : typical) {
      const Node& n = g.node(node);
      if (n.kind == OpKind::kEinsum) continue;
      by_op[op_name(n.kind)].first += instruction_bytes(g, node);
      by_op[op_name(n.kind)].second += seconds;
    }
    for (const auto& [op, sums] : by_op)
      if (sums.second > 0) rates.push_back({op, threads, sums.first / sums.second / 1e9});
  }
  return rates;
}

}  // namespace tessel::plan
