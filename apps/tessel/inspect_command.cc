// `tessel inspect`: prints, without running or loading data, the training
// graph (forward + gradients) of a config and its static memory plan.
#include <cstdio>

#include "commands.h"
#include "config_options.h"
#include "tessel/runtime/program.h"
#include "tessel/train/trainer.h"

namespace tessel::cli {
namespace {

struct InspectOptions {
  ConfigOptions config;
  bool graph = false;
};

int run_inspect(const InspectOptions& opt) {
  TrainConfig c = opt.config.load();
  TrainingGraph t = build_training_graph(c, c.batch);
  const Graph& graph = t.graph;
  std::vector<ValueId> outputs = {t.outputs.loss};
  outputs.insert(outputs.end(), t.grads.begin(), t.grads.end());
  Program program(graph, outputs);
  int64_t params = 0;
  for (ValueId p : graph.params()) params += graph.node(p).shape.numel();
  if (opt.graph) std::printf("%s\n", graph.to_string().c_str());
  std::printf("nodes: %d (forward + backward); %d instructions\n", graph.size(),
              program.instruction_count());
  std::printf("parameters: %lld (%.1f MiB)\n", static_cast<long long>(params),
              params * 4 / 1048576.0);
  std::printf("FLOPs per step: %.3f G\n", program.flops_per_run() / 1e9);
  std::printf("arena (activations, gradients, scratch; planned peak): %.2f MiB in %zu buffers\n",
              program.arena_bytes() / 1048576.0, program.buffer_requests().size());
  return 0;
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect", "print a config's graph and memory plan");
  opt->config.add_to(sub);
  sub->add_flag("--graph", opt->graph, "print every node of the training graph");
  return {sub, [opt] { return run_inspect(*opt); }};
}

}  // namespace tessel::cli
