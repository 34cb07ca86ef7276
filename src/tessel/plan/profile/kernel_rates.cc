#include "tessel/plan/profile/kernel_rates.h"

#include <omp.h>

#include <algorithm>
#include <map>

#include "tessel/compile/compile_rank.h"
#include "tessel/ir/op_table.h"
#include "tessel/plan/calibrate/instruction_timing.h"
#include "tessel/plan/model/kernel_work.h"

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

TrainConfig attention_rate_config(bool quick, Precision precision) {
  TrainConfig c;
  c.n_layer = 1;
  c.n_head = 4;
  c.d_model = 256;  // head dim 64, as the benchmark GPT's
  c.hidden = 256;   // a narrow MLP: the step's time is mostly attention
  c.context = quick ? 512 : 1024;
  c.batch = 1;
  c.attention = "fused";
  c.precision = precision_name(precision);
  return c;
}

std::vector<AttentionRate> measure_attention_rates(const std::vector<int>& thread_counts,
                                                   const std::vector<Precision>& precisions,
                                                   bool quick) {
  std::vector<AttentionRate> rates;
  if (thread_counts.empty()) return rates;
  for (Precision precision : precisions) {
    TrainConfig config = attention_rate_config(quick, precision);
    // Planned for the most threads timed (the backward's scratch has a block per thread).
    config.threads = *std::max_element(thread_counts.begin(), thread_counts.end());
    const std::unique_ptr<TimedProgram> timed = timed_training_program(config);
    Program& program = *timed->program;
    const Graph& g = program.graph();
    for (int threads : thread_counts) {
      std::map<std::string, std::pair<double, double>> by_op;  // FLOPs, seconds
      for (const auto& [node, seconds] :
           median_instruction_seconds(program, threads, quick ? 3 : 5)) {
        const OpKind kind = g.node(node).kind;
        if (kind != OpKind::kAttention && kind != OpKind::kAttentionGrad) continue;
        by_op[op_name(kind)].first += kernel_work_flops(g, node);
        by_op[op_name(kind)].second += seconds;
      }
      for (const auto& [op, sums] : by_op)
        if (sums.second > 0)
          rates.push_back({op, precision, threads, sums.first / sums.second / 1e9});
    }
  }
  return rates;
}

}  // namespace tessel::plan
