#include "tessel/plan/calibrate_check.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/ir/op_table.h"
#include "tessel/plan/cost_model.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::plan {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double value_bytes(const Graph& g, ValueId id) {
  return static_cast<double>(g.node(id).shape.numel()) * dtype_size(g.node(id).dtype);
}

double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

}  // namespace

ProgramCheck check_program(const TrainConfig& config, const HardwareModel& hw, int threads,
                           int repeats) {
  TS_CHECK(repeats >= 1, "calibrate --check: repeats must be positive, got ", repeats);
  TS_CHECK(config.precision == "f32", "calibrate --check: f32 configs only (precision '",
           config.precision, "')");
  TrainConfig c = config;
  if (c.recompute == "auto") c.recompute = "none";
  const TrainingGraph t = build_training_graph(c, c.batch);
  std::vector<ValueId> outputs = {t.outputs.loss};
  outputs.insert(outputs.end(), t.grads.begin(), t.grads.end());
  Program program(t.graph, outputs);
  std::vector<AlignedBuffer> params;
  for (ValueId p : t.graph.params()) {
    params.emplace_back(static_cast<size_t>(value_bytes(t.graph, p)));
    std::fill_n(params.back().as<float>(), t.graph.node(p).shape.numel(), 0.02f);
    program.bind_param(t.graph.node(p).name, params.back().as<float>());
  }
  const Graph& g = program.graph();
  const std::vector<Program::InstructionInfo> list = program.instruction_info();
  std::map<ValueId, size_t> index;  // node -> instruction
  for (size_t i = 0; i < list.size(); ++i) index[list[i].node] = i;

  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::vector<std::vector<double>> times(list.size());
  for (int run = 0; run <= repeats; ++run) {
    std::optional<ValueId> previous;
    double started = 0;
    auto close = [&](double now) {
      if (previous && run > 0) times[index.at(*previous)].push_back(now - started);
    };
    program.set_progress_hook([&] {
      const double now = seconds_now();
      close(now);
      previous = program.running_node();
      started = now;
    });
    program.run();
    close(seconds_now());
  }
  program.set_progress_hook(nullptr);
  omp_set_num_threads(saved_threads);

  CostOptions options;
  options.threads = threads;
  std::map<std::string, CheckedKind> by_kind;
  ProgramCheck out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (times[i].empty()) continue;  // bucket members (none here) and views the hook skips
    const Program::InstructionInfo& ins = list[i];
    const Node& n = g.node(ins.node);
    double predicted = 0;
    std::string kind;
    double flops = 0;
    if (ins.einsum) {
      const kernels::EinsumPlan& e = *ins.einsum;
      predicted = einsum_seconds(hw, g, ins, options);
      kind = "einsum " + std::to_string(e.batch) + "x" + std::to_string(e.m) + "x" +
             std::to_string(e.n) + "x" + std::to_string(e.k);
      flops = 2.0 * e.batch * e.m * e.n * e.k;
    } else {
      double bytes = value_bytes(g, ins.node);
      for (ValueId in : n.inputs) bytes += value_bytes(g, in);
      predicted = hw.kernel_seconds(op_name(n.kind), bytes, g.node_flops(ins.node), Precision::kF32,
                                    threads);
      kind = op_name(n.kind);
    }
    const double measured = fastest(times[i]);
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
