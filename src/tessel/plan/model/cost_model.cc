#include "tessel/plan/model/cost_model.h"

#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/compile/memory_report.h"
#include "tessel/plan/model/device_einsum.h"
#include "tessel/plan/model/kernel_work.h"
#include "tessel/plan/model/pipeline_timeline.h"
#include "tessel/plan/model/program_simulator.h"

namespace tessel::plan {

double einsum_seconds(const HardwareModel& hw, const Graph& g, const Program::InstructionInfo& ins,
                      const CostOptions& options) {
  TS_CHECK(ins.einsum, "einsum_seconds: instruction %", ins.node, " is not an einsum");
  const Node& n = g.node(ins.node);
  const kernels::EinsumPlan& e = *ins.einsum;
  const double copies =
      hw.einsum_costing() == EinsumCosting::kCompiled
          ? 2.0 * static_cast<double>(ins.scratch_bytes)
          : device_einsum_copy_bytes(g.node(n.inputs[0]).shape, g.node(n.inputs[1]).shape, n.shape,
                                     options.precision);
  const double flops = 2.0 * double(e.batch) * double(e.m) * double(e.n) * double(e.k);
  return hw.einsum_in_situ_factor(flops, options.precision, options.threads) *
         (hw.gemm_seconds(e.batch, e.m, e.n, e.k, options.precision, options.threads) +
          (copies > 0 ? hw.memory_seconds(copies, options.threads) : 0.0));
}

// The fused loss (kernels/linear_cross_entropy.h) is GEMMs: the logits'
// product, and in the backward that product again, dh's and dw's; its row
// work is priced as the cross-entropy kernel's over the logits it forms.
double linear_cross_entropy_seconds(const HardwareModel& hw, const Graph& g, const Node& n,
                                    const CostOptions& options) {
  const Shape& h = g.node(n.inputs[0]).shape;
  const int64_t embed = h.size(n.attrs.dim2), rows = h.numel() / embed;
  const int64_t vocab = g.node(n.inputs[1]).shape.size(n.attrs.dim);
  const bool grad = n.kind == OpKind::kLinearCrossEntropyGrad;
  const double logits_bytes = 4.0 * static_cast<double>(rows) * static_cast<double>(vocab);
  return (grad ? 3 : 1) *
             hw.gemm_seconds(1, rows, vocab, embed, options.precision, options.threads) +
         hw.kernel_seconds(op_name(grad ? OpKind::kCrossEntropyGrad : OpKind::kCrossEntropy),
                           (grad ? 2 : 1) * logits_bytes, 0, options.precision, options.threads);
}

double optimizer_seconds(const HardwareModel& hw, const TrainConfig& config, int threads,
                         double state, double share, int world, Link link) {
  const bool adamw = config.optimizer == "adamw";
  double t = share * hw.memory_seconds(state * 4, threads);
  if (adamw && offloads(config, "optimizer"))
    t += share * (hw.host_copy_seconds(state * offload_copy_bytes(config), threads) +
                  hw.host_memory_seconds(state * 7 * 4, threads));
  else
    t += share * hw.memory_seconds(state * (adamw ? 7 * 4 : 3 * 4), threads);
  if (world > 1) t += hw.collective_seconds(CollectiveKind::kAllReduce, 4, world, link);
  return t;
}

double instruction_seconds(const HardwareModel& hw, const Graph& g,
                           const Program::InstructionInfo& ins, const CostOptions& options) {
  const ValueId id = ins.node;
  const Node& n = g.node(id);
  const bool fused_loss =
      n.kind == OpKind::kLinearCrossEntropy || n.kind == OpKind::kLinearCrossEntropyGrad;
  const double t = ins.einsum   ? einsum_seconds(hw, g, ins, options)
                   : fused_loss ? linear_cross_entropy_seconds(hw, g, n, options)
                                : hw.kernel_seconds(op_name(n.kind), instruction_bytes(g, id),
                                                    kernel_work_flops(g, id), options.precision,
                                                    options.threads) +
                                      hw.draw_seconds(kernel_work_draws(g, id), options.threads);
  // Offloaded activations' copies and host weights' reads run in order with the kernels.
  const size_t host_bytes =
      ins.offload_bytes + (options.weights_on_host ? ins.param_read_bytes : 0);
  return std::max(hw.launch_seconds(), t) +
         hw.host_copy_seconds(static_cast<double>(host_bytes), options.threads);
}

namespace {

// `options` for costing `config` (CostOptions::weights_on_host).
CostOptions options_for(const TrainConfig& config, const HardwareModel& hw,
                        const CostOptions& options) {
  CostOptions out = options;
  out.weights_on_host = offloads(config, "weights") && !hw.host_buffers_on_device();
  return out;
}

}  // namespace

Link link_of_axis(const Mesh& mesh, int axis, int devices_per_node) {
  if (devices_per_node <= 0) return Link::kIntraNode;
  int64_t stride = 1;
  for (int a = axis + 1; a < static_cast<int>(mesh.axes().size()); ++a) stride *= mesh.axis(a).size;
  return stride * mesh.axis(axis).size <= devices_per_node ? Link::kIntraNode : Link::kInterNode;
}

std::vector<int> representative_ranks(const Mesh& mesh, bool every_rank) {
  std::vector<int> ranks;
  const int pipe = mesh.axis_index("pipe");
  const int p = pipe >= 0 ? mesh.axis(pipe).size : 1;
  for (int r = 0; r < mesh.rank_count(); ++r) {
    const std::vector<int> coords = mesh.coords(r);
    bool first = true;
    for (int a = 0; a < static_cast<int>(coords.size()); ++a)
      if (a != pipe && coords[a] != 0) first = false;
    // Past 4 pipeline ranks, the middle ones stand in for each other.
    const int q = pipe >= 0 ? coords[pipe] : 0;
    if (every_rank || (first && (p <= 4 || q <= 1 || q == p - 1))) ranks.push_back(r);
  }
  return ranks;
}

std::vector<CompiledRank> compile_ranks(const TrainConfig& config, const std::vector<int>& ranks,
                                        GraphCache* cache) {
  TS_CHECK(!ranks.empty(), "predict_step: no ranks to compile");
  const Mesh mesh = Mesh::parse(config.mesh);
  const Layout layout = layout_for(config, mesh);
  std::vector<CompiledRank> compiled;
  for (int r : ranks)
    compiled.push_back(
        compile_rank(config, mesh, layout, r, CompileMode::kPlanOnly, nullptr, cache));
  return compiled;
}

StepPrediction predict_compiled(const std::vector<CompiledRank>& compiled, const HardwareModel& hw,
                                const CostOptions& options, const Schedule* schedule,
                                StagePhaseMemo* memo) {
  TS_CHECK(!compiled.empty(), "predict_compiled: no compiled ranks");
  const bool pipelined = compiled.front().pipelined();
  TS_CHECK(
      !schedule || (pipelined && !schedule->asynchronous &&
                    schedule->chunks == compiled.front().pipeline->schedule().chunks &&
                    schedule->microbatches == compiled.front().pipeline->schedule().microbatches),
      "predict_compiled: another schedule must be synchronous with the same chunks and "
      "micro-batches");
  StepPrediction out;
  out.peak_bytes = -1;
  for (const CompiledRank& c : compiled) {
    const RankMemory m = predict_rank_memory(c, schedule);
    const int64_t bytes = hw.host_buffers_on_device() ? m.total() : m.device();
    if (bytes > out.peak_bytes) out.peak_bytes = bytes, out.peak_rank = c.rank;
    out.host_bytes = std::max(out.host_bytes, m.host.total());
  }
  const Mesh& mesh = compiled.front().mesh;
  const double share = std::max(1.0, hw.compute_share(mesh.rank_count(), options.threads));
  // Co-run: other ranks on this rank's node (ranks fill a node in order)
  // slow its kernels and memory passes by the measured factor while they
  // compute (HardwareModel::co_run; 1 on a cluster). A single program's
  // ranks compute all the time, as do a pipeline's when other axes share
  // its stages or ranks share cores (every core busy); a pipeline alone on
  // its node computes beside the others only where the schedule overlaps
  // their actions (pipeline_steps).
  // A measured factor below 1 (a rank faster beside a busy one) is the
  // measurement's noise, not a mechanism: taken as 1.
  CoRun co_run = hw.co_run();
  co_run.computing = std::max(1.0, co_run.computing);
  co_run.polling = std::max(1.0, co_run.polling);
  const bool beside =
      mesh.rank_count() > 1 && std::min(mesh.rank_count(), hw.devices_per_node()) > 1;
  const double busy = beside ? co_run.computing : 1.0;
  const Simulator sim(mesh, hw, options_for(compiled.front().config, hw, options), share * busy);
  std::vector<RankStep> steps;
  if (pipelined) {
    const Schedule& sched = schedule ? *schedule : compiled.front().pipeline->schedule();
    PipelineCoRun co;
    if (beside && (share > 1 || mesh.rank_count() > sched.ranks)) {
      co.uniform = co_run.computing;
    } else if (beside && (co_run.computing != 1 || co_run.polling != 1)) {
      co.overlap = true;
      co.computing = co_run.computing;
      co.polling = co_run.polling;
    }
    steps = pipeline_steps(compiled, sched, sim.with_share(1), sim, share, co, memo);
  } else {
    steps.push_back(single_program_step(compiled.front(), sim));
  }
  const RankStep* slowest = &steps.front();
  for (const RankStep& s : steps)
    if (s.end_s > slowest->end_s) slowest = &s;
  out.step_s = slowest->end_s;
  out.compute_s = slowest->compute_s;
  out.optimizer_s = slowest->optimizer_s;
  out.bubble_s = slowest->bubble_s;
  out.comm_s = slowest->comm_s;
  out.exposed_comm_s = slowest->exposed_s;
  return out;
}

StepPrediction predict_step(const TrainConfig& config, const std::vector<int>& ranks,
                            const HardwareModel& hw, const CostOptions& options,
                            GraphCache* cache) {
  return predict_compiled(compile_ranks(config, ranks, cache), hw, options, nullptr);
}

std::vector<StagePhaseCost> stage_phase_costs(const CompiledRank& c, const HardwareModel& hw,
                                              const CostOptions& options, Link link) {
  TS_CHECK(c.pipelined(), "stage_phase_costs: rank ", c.rank, " is not pipelined");
  return phase_costs(c, Simulator(c.mesh, hw, options_for(c.config, hw, options), 1.0, link));
}

}  // namespace tessel::plan
