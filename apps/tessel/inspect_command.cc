// `tessel inspect`: prints, without running or loading data, a config's
// training graph as one rank of its mesh will run it: each value's sharding,
// every collective the lowering inserted and the op that needs it, bytes per
// step per mesh axis, and the static memory plan. Needs no MPI.
// Bytes are what the program carries: 2 an element for a collective it
// carries in bf16 (tp_comm_precision, grad_reduce_precision, a bf16-stored
// gather), where the lowering counts the f32 value.
#include <cstdio>
#include <map>
#include <set>

#include "commands.h"
#include "config_options.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/lower.h"

namespace tessel::cli {
namespace {

// The local graph's collectives that `program` carries in bf16.
std::set<ValueId> carried_in_bf16(const Program& program) {
  const std::vector<Program::BucketInfo> buckets = program.bucket_info();
  std::set<ValueId> out;
  for (const Program::InstructionInfo& ins : program.instruction_info())
    if (ins.carries_bf16 || (ins.bucket >= 0 && buckets[ins.bucket].bf16)) out.insert(ins.node);
  return out;
}

struct InspectOptions {
  ConfigOptions config;
  bool graph = false;
  bool values = false;
  int rank = 0;
};

int run_inspect(const InspectOptions& opt) {
  TrainConfig c = opt.config.load();
  const Mesh mesh = Mesh::parse(c.mesh);
  if (opt.rank < 0 || opt.rank >= mesh.rank_count())
    TS_THROW("--rank ", opt.rank, " is not a rank of mesh ", mesh.to_string());
  CompiledRank compiled =
      compile_rank(c, mesh, layout_for(c, mesh), opt.rank, CompileMode::kPlanOnly);
  if (compiled.recompute_choice) std::printf("%s", compiled.recompute_choice->report().c_str());
  if (compiled.pipelined()) return inspect_pipeline(compiled);
  const Graph& graph = compiled.train.global;
  const Layout& layout = compiled.layout;
  const LocalGraph& local = compiled.train.local;
  const Program& program = *compiled.train.program;

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
  // The lowering's conversions the program runs (it drops those no output
  // needs, such as a backward's copy of a forward value it reads as made).
  std::vector<const InsertedCollective*> run;
  for (const InsertedCollective& col : local.collectives)
    if (program.computes(col.local)) run.push_back(&col);
  std::printf("\ncollectives per training step (%zu):\n", run.size());
  const std::set<ValueId> bf16 = carried_in_bf16(program);
  std::map<std::string, double> bytes_per_axis;
  for (const InsertedCollective* col : run) {
    const bool in_bf16 = bf16.count(col->local) > 0;
    const double bytes = in_bf16 ? col->bytes / 2 : col->bytes;
    bytes_per_axis[col->axis] += bytes;
    std::printf("  %-15s on %-6s %-8s -> %-8s %10.0f B %s  %s (%s)\n", op_name(col->op),
                col->axis.c_str(), col->from.c_str(), col->to.c_str(), bytes,
                bytes == 0 ? "    "
                : in_bf16  ? "bf16"
                           : "f32 ",
                col->value.c_str(), col->reason.c_str());
  }
  std::printf("\nbytes sent per step by this rank, per axis:\n");
  for (const auto& [axis, bytes] : bytes_per_axis)
    std::printf("  %-8s %12.0f\n", axis.c_str(), bytes);
  std::printf("\nnodes: %d global, %d local; %d instructions\n", graph.size(), local.graph.size(),
              program.instruction_count());
  std::printf("FLOPs per step (whole model): %.3f G\n",
              graph.flops(std::vector<bool>(graph.size(), true)) / 1e9);
  std::printf("arena on this rank (activations, gradients, scratch; planned peak): %.2f MiB\n",
              program.arena_bytes() / 1048576.0);
  if (program.offloaded_values() > 0)
    std::printf("offloaded to pinned host memory (offload: activations): %d values, %.2f MiB\n",
                program.offloaded_values(), program.offload_bytes() / 1048576.0);
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
