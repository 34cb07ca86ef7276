// `tessel inspect`: prints, without running or loading data, a config's
// training graph as one rank of its mesh will run it: each value's sharding,
// every collective the lowering inserted and the op that needs it, bytes per
// step per mesh axis, and the static memory plan. Needs no MPI.
#include <cstdio>

#include "commands.h"
#include "config_options.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/lower.h"
#include "tessel/train/pipeline_model.h"
#include "tessel/train/recompute_choice.h"
#include "tessel/train/trainer.h"

namespace tessel::cli {
namespace {

struct InspectOptions {
  ConfigOptions config;
  bool graph = false;
  bool values = false;
  int rank = 0;
};

int run_inspect(const InspectOptions& opt) {
  TrainConfig c = opt.config.load();
  if (c.recompute == "auto") {
    RecomputeChoice choice = choose_recompute(c);
    std::printf("%s", choice.report().c_str());
    c.recompute = choice.chosen;
  }
  if (uses_pipeline(c, Mesh::parse(c.mesh))) return inspect_pipeline(c, opt.rank);
  TrainingGraph t = build_training_graph(c, c.batch);
  const Graph& graph = t.graph;
  Mesh mesh = Mesh::parse(c.mesh);
  Layout layout = c.layout.empty() ? Layout::defaults(mesh) : Layout::parse(c.layout, mesh);
  for (const auto& [label, spec] : c.shard) layout.set_override(label, spec, mesh);
  layout.validate(graph, mesh);
  if (opt.rank < 0 || opt.rank >= mesh.rank_count())
    TS_THROW("--rank ", opt.rank, " is not a rank of mesh ", mesh.to_string());
  std::vector<ValueId> outputs = {t.outputs.loss};
  outputs.insert(outputs.end(), t.grads.begin(), t.grads.end());
  LocalGraph local =
      lower_to_rank(graph, outputs, mesh, layout, opt.rank, training_lowering(t, c, layout, mesh));
  std::vector<ValueId> local_outputs;
  for (ValueId v : outputs) local_outputs.push_back(local.local_of[v]);
  CompileOptions options;
  options.plan_only = true;  // the run's plan (gradient buckets included), nothing allocated
  options.bucket_bytes = static_cast<size_t>(c.bucket_mib * 1048576.0);
  options.bf16 = c.precision == "bf16";
  Program program(local.graph, local_outputs, options);

  if (opt.graph) std::printf("%s\n", local.graph.to_string().c_str());
  int64_t params = 0;
  for (ValueId p : graph.params()) params += graph.node(p).shape.numel();
  std::printf("mesh %s, rank %d of %d, layout %s\n", mesh.to_string().c_str(), opt.rank,
              mesh.rank_count(),
              layout.to_string().empty() ? "(none)" : layout.to_string().c_str());
  std::printf("parameters: %lld (%.1f MiB in full)\n", static_cast<long long>(params),
              params * 4 / 1048576.0);
  std::printf("\nparameter shardings:\n");
  for (ValueId p : graph.params())
    std::printf("  %-28s %-36s %s\n", graph.node(p).name.c_str(),
                graph.node(p).shape.to_string().c_str(), local.sharding_of[p].to_string().c_str());
  if (opt.values) {
    std::printf("\nvalue shardings:\n");
    for (ValueId v = 0; v < graph.size(); ++v)
      if (local.local_of[v] >= 0)
        std::printf("  %%%-5d %-40s %s\n", v, graph.node(v).name.c_str(),
                    local.sharding_of[v].to_string().c_str());
  }
  std::printf("\ncollectives per training step (%zu):\n", local.collectives.size());
  for (const InsertedCollective& col : local.collectives)
    std::printf("  %-15s on %-6s %-8s -> %-8s %10.0f B  %s (%s)\n", op_name(col.op),
                col.axis.c_str(), col.from.c_str(), col.to.c_str(), col.bytes, col.value.c_str(),
                col.reason.c_str());
  std::printf("\nbytes sent per step by this rank, per axis:\n");
  for (const auto& [axis, bytes] : local.bytes_per_axis)
    std::printf("  %-8s %12.0f\n", axis.c_str(), bytes);
  std::printf("\nnodes: %d global, %d local; %d instructions\n", graph.size(), local.graph.size(),
              program.instruction_count());
  std::printf("FLOPs per step (whole model): %.3f G\n", [&] {
    std::vector<bool> all(graph.size(), true);
    return graph.flops(all) / 1e9;
  }());
  std::printf("arena on this rank (activations, gradients, scratch; planned peak): %.2f MiB\n",
              program.arena_bytes() / 1048576.0);
  return 0;
}

}  // namespace

Command add_inspect_command(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect", "print a config's sharded graph and memory plan");
  opt->config.add_to(sub);
  sub->add_flag("--graph", opt->graph, "print every node of the rank's local graph");
  sub->add_flag("--values", opt->values, "print every value's sharding");
  sub->add_option("--rank", opt->rank, "which rank of the mesh to show (default 0)");
  return {sub, [opt] { return run_inspect(*opt); }};
}

}  // namespace tessel::cli
