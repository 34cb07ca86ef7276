#include "tessel/plan/calibrate/instruction_timing.h"

#include <omp.h>

#include <algorithm>
#include <optional>

#include "tessel/base/steady_clock.h"
#include "tessel/ir/op_table.h"

namespace tessel::plan {

std::unique_ptr<TimedProgram> timed_training_program(const TrainConfig& config) {
  auto timed = std::make_unique<TimedProgram>();
  timed->training = build_training_graph(config, config.batch);
  const TrainingGraph& t = timed->training;
  std::vector<ValueId> outputs = {t.outputs.loss};
  outputs.insert(outputs.end(), t.grads.begin(), t.grads.end());
  timed->program = std::make_unique<Program>(t.graph, outputs, precision_compile_options(config));
  for (ValueId p : t.graph.params()) {
    timed->params.emplace_back(static_cast<size_t>(value_bytes(t.graph, p)));
    std::fill_n(timed->params.back().as<float>(), t.graph.node(p).shape.numel(), 0.02f);
    timed->program->bind_param(t.graph.node(p).name, timed->params.back().as<float>());
  }
  return timed;
}

double device_done_seconds(Program& program) {
  program.backend().synchronize();
  return steady_seconds();
}

std::map<ValueId, double> median_instruction_seconds(Program& program, int threads, int repeats) {
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::map<ValueId, std::vector<double>> runs;
  for (int run = 0; run <= repeats; ++run) {
    std::optional<ValueId> previous;
    double started = 0;
    auto close = [&](double now) {
      if (previous && run > 0) runs[*previous].push_back(now - started);
    };
    program.set_progress_hook([&] {
      const double now = device_done_seconds(program);
      close(now);
      previous = program.running_node();
      started = now;
    });
    program.run();
    close(device_done_seconds(program));  // nothing left open: the hook ran after the last
  }
  program.set_progress_hook(nullptr);
  omp_set_num_threads(saved_threads);
  std::map<ValueId, double> medians;
  for (auto& [node, seconds] : runs) {
    std::sort(seconds.begin(), seconds.end());
    medians[node] = seconds[seconds.size() / 2];
  }
  return medians;
}

std::string instruction_kind(const Graph& graph, const Program::InstructionInfo& ins) {
  if (!ins.einsum) return op_name(graph.node(ins.node).kind);
  const kernels::EinsumPlan& e = *ins.einsum;
  return "einsum " + std::to_string(e.batch) + "x" + std::to_string(e.m) + "x" +
         std::to_string(e.n) + "x" + std::to_string(e.k);
}

}  // namespace tessel::plan
