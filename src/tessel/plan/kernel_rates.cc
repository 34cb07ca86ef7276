#include "tessel/plan/kernel_rates.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "tessel/compile/compile_rank.h"
#include "tessel/ir/op_table.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::plan {
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double value_bytes(const Graph& g, ValueId id) {
  return static_cast<double>(g.node(id).shape.numel()) * dtype_size(g.node(id).dtype);
}

}  // namespace

std::vector<KernelRate> measure_kernel_rates(const std::vector<int>& thread_counts, bool quick) {
  TrainConfig c;
  c.n_layer = 1;
  c.n_head = 6;
  c.d_model = 384;
  c.context = 128;
  c.batch = quick ? 4 : 8;
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
  // Token ids stay 0 (a valid id); the timing does not depend on the values.
  const Graph& g = program.graph();
  const int repeats = quick ? 2 : 4;
  const int saved_threads = omp_get_max_threads();
  std::vector<KernelRate> rates;
  for (int threads : thread_counts) {
    omp_set_num_threads(threads);
    std::map<ValueId, double> best;  // per instruction's node: the fastest run
    for (int run = 0; run <= repeats; ++run) {
      std::optional<ValueId> previous;
      double started = 0;
      program.set_progress_hook([&] {
        const double now = seconds_now();
        if (previous && run > 0) {
          auto [it, fresh] = best.emplace(*previous, now - started);
          if (!fresh) it->second = std::min(it->second, now - started);
        }
        previous = program.running_node();
        started = now;
      });
      program.run();
    }
    program.set_progress_hook(nullptr);
    std::map<std::string, std::pair<double, double>> by_op;  // bytes, seconds
    for (const auto& [node, seconds] : best) {
      const Node& n = g.node(node);
      if (n.kind == OpKind::kEinsum) continue;
      double bytes = value_bytes(g, node);
      for (ValueId in : n.inputs) bytes += value_bytes(g, in);
      by_op[op_name(n.kind)].first += bytes;
      by_op[op_name(n.kind)].second += seconds;
    }
    for (const auto& [op, sums] : by_op)
      if (sums.second > 0) rates.push_back({op, threads, sums.first / sums.second / 1e9});
  }
  omp_set_num_threads(saved_threads);
  return rates;
}

}  // namespace tessel::plan
