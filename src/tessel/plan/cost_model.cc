#include "tessel/plan/cost_model.h"

#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/compile/memory_report.h"
#include "tessel/schedule/schedule_check.h"

namespace tessel::plan {
namespace {

double value_bytes(const Graph& g, ValueId id) {
  const Node& n = g.node(id);
  return static_cast<double>(n.shape.numel()) * static_cast<double>(dtype_size(n.dtype));
}

// One program's instructions on the hardware, phase by phase.
struct ProgramTime {
  std::vector<double> compute_s;  // per phase: kernels
  std::vector<std::map<std::string, double>>
      blocking_s;                                  // per phase, per axis: blocking collectives
  std::map<std::string, double> bucket_s;          // per axis: bucketed all-reduces
  std::map<std::string, double> bucket_exposed_s;  // per axis: waited for at the end
  double end_s = 0;                                // the whole program, bucket waits included
  double phase_s(int phase) const {
    double t = compute_s[phase];
    for (const auto& [axis, s] : blocking_s[phase]) t += s;
    return t;
  }
};

class Simulator {
 public:
  Simulator(const Mesh& mesh, const HardwareModel& hw, const CostOptions& options)
      : mesh_(mesh), hw_(hw), options_(options) {}

  double memory(double bytes) const {
    return bytes > 0 ? hw_.memory_seconds(bytes, options_.threads) : 0;
  }

  double collective(CollectiveKind kind, double bytes, const std::string& axis) const {
    const int a = mesh_.axis_index(axis);
    TS_CHECK(a >= 0, "cost model: collective on axis '", axis, "', which mesh ", mesh_.to_string(),
             " lacks");
    const int ranks = mesh_.axis(a).size;
    if (ranks < 2) return 0;
    return hw_.collective_seconds(kind, bytes, ranks,
                                  link_of_axis(mesh_, a, hw_.devices_per_node()));
  }

  double kernel(const Graph& g, const Program::InstructionInfo& ins) const {
    const Node& n = g.node(ins.node);
    if (ins.einsum) {
      const kernels::EinsumPlan& e = *ins.einsum;
      return hw_.gemm_seconds(e.batch, e.m, e.n, e.k, options_.precision, options_.threads) +
             memory(2.0 * static_cast<double>(ins.scratch_bytes));
    }
    double bytes = value_bytes(g, ins.node);
    for (ValueId in : n.inputs) bytes += value_bytes(g, in);
    return hw_.kernel_seconds(op_name(n.kind), bytes, g.node_flops(ins.node), options_.precision,
                              options_.threads);
  }

  // A blocking collective node of a local graph (its kind and payload as
  // the Communicator counts them).
  double collective_node(const Graph& g, ValueId id) const {
    const Node& n = g.node(id);
    const double in = value_bytes(g, n.inputs[0]);
    switch (n.kind) {
      case OpKind::kAllReduce:
        return collective(CollectiveKind::kAllReduce, in, n.attrs.axis);
      case OpKind::kAllGather:
        return collective(CollectiveKind::kAllGather, in, n.attrs.axis) +
               memory(2 * value_bytes(g, id));  // unpacking the shards
      case OpKind::kReduceScatter:
        return collective(CollectiveKind::kReduceScatter, in, n.attrs.axis) + memory(2 * in);
      case OpKind::kAllToAll:
        return collective(CollectiveKind::kAllToAll, in, n.attrs.axis) + memory(4 * in);
      default:
        TS_THROW("cost model: ", op_name(n.kind), " is not a collective");
    }
  }

  ProgramTime run(const Program& p) const {
    const Graph& g = p.graph();
    const std::vector<Program::InstructionInfo> list = p.instruction_info();
    const std::vector<Program::BucketInfo> buckets = p.bucket_info();
    ProgramTime t;
    const int phases = std::max(1, p.phase_count());
    t.compute_s.assign(phases, 0);
    t.blocking_s.assign(phases, {});
    double clock = 0;
    std::map<std::string, double> channel_free;  // per axis: when its bucket channel is idle
    for (size_t i = 0; i < list.size(); ++i) {
      const Program::InstructionInfo& ins = list[i];
      const Node& n = g.node(ins.node);
      double dt = 0;
      if (ins.bucket >= 0) {
        dt = memory(2 * value_bytes(g, ins.node));  // the copy into the bucket
        t.compute_s[ins.phase] += dt;
        clock += dt;
        const Program::BucketInfo& b = buckets[ins.bucket];
        if (b.last_instruction == static_cast<int>(i)) {
          const double d =
              collective(CollectiveKind::kAllReduce, static_cast<double>(b.bytes), b.axis);
          double& free = channel_free[b.axis];
          free = std::max(free, clock) + d;
          t.bucket_s[b.axis] += d;
        }
        continue;
      }
      if (communicates(n.kind)) {
        dt = collective_node(g, ins.node);
        t.blocking_s[ins.phase][n.attrs.axis] += dt;
      } else {
        dt = kernel(g, ins);
        t.compute_s[ins.phase] += dt;
      }
      clock += dt;
    }
    t.end_s = clock;
    for (const auto& [axis, free] : channel_free) {
      const double wait = std::max(0.0, free - t.end_s);
      t.bucket_exposed_s[axis] += wait;
      t.end_s = std::max(t.end_s, free);
    }
    return t;
  }

  // The optimizer over `state` elements (one pass reading and writing the
  // parameter and both moments, reading the gradient), the gradient norm's
  // pass and its world all-reduce.
  double update(double state, const std::string& optimizer) const {
    const double bytes_per_element = optimizer == "adamw" ? 7 * 4 : 3 * 4;
    double t = memory(state * bytes_per_element) + memory(state * 4);
    if (mesh_.rank_count() > 1) {
      const Link link =
          mesh_.rank_count() <= hw_.devices_per_node() ? Link::kIntraNode : Link::kInterNode;
      t += hw_.collective_seconds(CollectiveKind::kAllReduce, 4, mesh_.rank_count(), link);
    }
    return t;
  }

  // One point-to-point message on `axis` (pipeline transfers).
  double p2p(double bytes, int axis) const {
    return hw_.p2p_seconds(bytes, link_of_axis(mesh_, axis, hw_.devices_per_node()));
  }

 private:
  const Mesh& mesh_;
  const HardwareModel& hw_;
  CostOptions options_;
};

struct RankStep {
  double end_s = 0;  // the rank's step time
  double compute_s = 0, optimizer_s = 0, bubble_s = 0;
  std::map<std::string, double> comm_s, exposed_s;
};

RankStep single_program_step(const CompiledRank& c, const Simulator& sim) {
  RankStep r;
  const ProgramTime t = sim.run(*c.train.program);
  for (double s : t.compute_s) r.compute_s += s;
  for (const auto& phase : t.blocking_s)
    for (const auto& [axis, s] : phase) {
      r.comm_s[axis] += s;
      r.exposed_s[axis] += s;
    }
  for (const auto& [axis, s] : t.bucket_s) r.comm_s[axis] += s;
  for (const auto& [axis, s] : t.bucket_exposed_s) r.exposed_s[axis] += s;
  // Feeding this rank's block of the batch.
  double feed = 0;
  for (ValueId id : c.train.global.inputs())
    feed += 2 * value_bytes(c.train.local.graph, c.train.local.local_of[id]);
  r.compute_s += sim.memory(feed);
  // The update over this rank's state slices, and the ZeRO-1/2 gathers of
  // the updated slices.
  const Graph& g = c.train.global;
  double state = 0;
  const int zero_axis = c.config.zero > 0 ? c.layout.axis_of("batch") : -1;
  for (size_t i = 0; i < g.params().size(); ++i) {
    const ValueId p = g.params()[i];
    const Shape& shape = g.node(p).shape;
    const int64_t n = c.train.local.sharding_of[c.grads[i]].local_shape(shape, c.mesh).numel();
    const int64_t held = c.train.local.sharding_of[p].local_shape(shape, c.mesh).numel();
    state += static_cast<double>(n);
    if (zero_axis >= 0 && n != held) {
      const std::string& axis = c.mesh.axis(zero_axis).name;
      const double gather =
          sim.collective(CollectiveKind::kAllGather, 4.0 * n, axis) + sim.memory(8.0 * n);
      r.comm_s[axis] += gather;
      r.exposed_s[axis] += gather;
      r.optimizer_s += gather;
    }
  }
  r.optimizer_s += sim.update(state, c.config.optimizer);
  r.end_s = t.end_s + sim.memory(feed) + r.optimizer_s;
  return r;
}

// A pipelined configuration: phase times of every representative's stages
// drive the schedule simulator; then each rank's per-step reductions and update.
std::vector<RankStep> pipeline_steps(const std::vector<CompiledRank>& reps,
                                     const Schedule& schedule, const Simulator& sim) {
  const PipelineModel& first = *reps.front().pipeline;
  const int p = schedule.ranks;
  std::vector<const CompiledRank*> by_pipe(p, nullptr);
  for (const CompiledRank& c : reps)
    if (!by_pipe[c.pipeline->pipe_rank()]) by_pipe[c.pipeline->pipe_rank()] = &c;
  TS_CHECK(by_pipe[0] && by_pipe[p - 1],
           "cost model: no representative for the first or last "
           "pipeline rank");

  struct StageCost {
    double f = 0, bi = 0, bw = 0, act_bytes = 0, grad_bytes = 0;
    std::map<std::string, double> comm_f, comm_b;  // blocking, per axis
  };
  // Per pipeline rank: its chunks' costs and the elements it holds.
  struct RankCosts {
    std::vector<StageCost> chunks;
    double held = 0, state = 0, tied = 0;
  };
  std::vector<RankCosts> cost(p);
  for (int r = 0; r < p; ++r) {
    if (!by_pipe[r]) continue;
    const CompiledRank& c = *by_pipe[r];
    for (const PipelineStage& st : c.pipeline->compiled_stages()) {
      const Program& prog = *st.instances.front();
      const ProgramTime t = sim.run(prog);
      StageCost sc;
      sc.f = t.phase_s(0);
      const size_t phases = t.compute_s.size();
      sc.bi = phases > 1 ? t.phase_s(1) : 0;
      sc.bw = phases > 2 ? t.phase_s(2) : 0;
      double grads = 0;
      for (ValueId v : st.param_grads) grads += value_bytes(prog.graph(), v);
      sc.bw += sim.memory(3 * grads);  // accumulated into the stage's accumulators
      for (ValueId v : st.activations_out) sc.act_bytes += value_bytes(prog.graph(), v);
      for (ValueId v : st.gradients_out) sc.grad_bytes += value_bytes(prog.graph(), v);
      for (int ph = 0; ph < static_cast<int>(t.blocking_s.size()); ++ph)
        for (const auto& [axis, s] : t.blocking_s[ph]) (ph == 0 ? sc.comm_f : sc.comm_b)[axis] += s;
      if (static_cast<int>(cost[r].chunks.size()) <= st.chunk) cost[r].chunks.resize(st.chunk + 1);
      cost[r].chunks[st.chunk] = sc;
    }
    for (const PipelineParam& q : c.pipeline->params()) {
      if (!q.held) continue;
      const double n = static_cast<double>(q.sharding.local_shape(q.shape, c.mesh).numel());
      cost[r].held += n;
      cost[r].state += static_cast<double>(q.state_sharding().local_shape(q.shape, c.mesh).numel());
      if (q.pipe_ranks.size() > 1) cost[r].tied += n;
    }
  }
  // Ranks not compiled hold middle stages only: a compiled middle rank's
  // costs, scaled by each chunk's block count (the partition is known).
  const StagePartition& part = first.partition();
  auto blocks = [&](int stage) {
    const int end = stage + 1 < part.stages ? part.first_block[stage + 1] : part.blocks;
    return std::max(1, end - part.first_block[stage]);
  };
  for (int r = 0; r < p; ++r) {
    if (by_pipe[r]) continue;
    int t = -1;
    for (int k = 1; k + 1 < p && t < 0; ++k)
      if (by_pipe[k]) t = k;
    TS_CHECK(t >= 0, "cost model: no middle pipeline rank to stand for rank ", r);
    cost[r] = cost[t];
    cost[r].tied = 0;
    double ratio_sum = 0;
    for (size_t c = 0; c < cost[r].chunks.size(); ++c) {
      const double ratio = static_cast<double>(blocks(schedule.stage_of(r, static_cast<int>(c)))) /
                           blocks(schedule.stage_of(t, static_cast<int>(c)));
      StageCost& sc = cost[r].chunks[c];
      sc.f *= ratio, sc.bi *= ratio, sc.bw *= ratio;
      for (auto* comm : {&sc.comm_f, &sc.comm_b})
        for (auto& [axis, v] : *comm) v *= ratio;
      ratio_sum += ratio;
    }
    const double mean = ratio_sum / static_cast<double>(std::max<size_t>(1, cost[r].chunks.size()));
    cost[r].held *= mean;
    cost[r].state *= mean;
  }
  const CompiledRank& any = *by_pipe[0];
  const int pipe_axis = first.pipe_axis();
  ActionCosts costs;
  costs.compute = [&](int r, const Action& a) {
    const StageCost& sc = cost[r].chunks[a.chunk];
    return action_cost(a.kind, UnitCosts{sc.f, sc.bi, sc.bw});
  };
  costs.transfer = [&](int r, const Action& a) {
    const StageCost& sc = cost[r].chunks[a.chunk];
    const double bytes = a.kind == ActionKind::kSendActivation ? sc.act_bytes : sc.grad_bytes;
    return pipe_axis >= 0 ? sim.p2p(bytes, pipe_axis) : 0.0;
  };
  const SimulatedTimeline timeline = simulate_schedule(schedule, costs);

  std::vector<RankStep> steps;
  for (int r = 0; r < p; ++r) {
    RankStep s;
    double busy = 0;
    for (const SimulatedTimeline::Event& e : timeline.events)
      if (e.rank == r) {
        busy += e.end - e.start;
        const StageCost& sc = cost[r].chunks[e.action.chunk];
        const auto& comm = e.action.kind == ActionKind::kForward ? sc.comm_f : sc.comm_b;
        for (const auto& [axis, t] : comm) {
          s.comm_s[axis] += t;
          s.exposed_s[axis] += t;
          busy -= t;
        }
      }
    s.compute_s = busy;
    s.bubble_s = timeline.makespan * (timeline.bubble_fraction[r]);
    // After the schedule: the accumulators' data-axis reduction (or
    // reduce-scatter under ZeRO), the tied parameters' pipe-axis sum, the update.
    const double held = cost[r].held, state = cost[r].state, tied = cost[r].tied;
    double post = 0;
    if (!any.pipeline->data_axis().empty()) {
      const std::string& axis = any.pipeline->data_axis();
      const double d = any.config.zero > 0
                           ? sim.collective(CollectiveKind::kReduceScatter, 4 * held, axis)
                           : sim.collective(CollectiveKind::kAllReduce, 4 * held, axis);
      s.comm_s[axis] += d;
      s.exposed_s[axis] += d;
      post += d;
    }
    if (tied > 0 && pipe_axis >= 0) {
      const double d = sim.collective(CollectiveKind::kAllReduce, 4 * tied, "pipe");
      s.comm_s["pipe"] += d;
      s.exposed_s["pipe"] += d;
      post += d;
    }
    s.optimizer_s = post + sim.update(state, any.config.optimizer);
    s.end_s = timeline.makespan + s.optimizer_s;
    steps.push_back(s);
  }
  return steps;
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
    if (every_rank) {
      ranks.push_back(r);
      continue;
    }
    const std::vector<int> coords = mesh.coords(r);
    bool first = true;
    for (int a = 0; a < static_cast<int>(coords.size()); ++a)
      if (a != pipe && coords[a] != 0) first = false;
    // Past 4 pipeline ranks, the middle ones stand in for each other.
    const int q = pipe >= 0 ? coords[pipe] : 0;
    if (first && (p <= 4 || q <= 1 || q == p - 1)) ranks.push_back(r);
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
                                const CostOptions& options, const Schedule* schedule) {
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
    const int64_t bytes = predict_rank_memory(c, schedule).total();
    if (bytes > out.peak_bytes) out.peak_bytes = bytes, out.peak_rank = c.rank;
  }
  const Simulator sim(compiled.front().mesh, hw, options);
  std::vector<RankStep> steps;
  if (pipelined) {
    steps =
        pipeline_steps(compiled, schedule ? *schedule : compiled.front().pipeline->schedule(), sim);
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
                                              const CostOptions& options) {
  TS_CHECK(c.pipelined(), "stage_phase_costs: rank ", c.rank, " is not pipelined");
  const Simulator sim(c.mesh, hw, options);
  std::vector<StagePhaseCost> out;
  for (const PipelineStage& st : c.pipeline->compiled_stages()) {
    const Program& prog = *st.instances.front();
    const ProgramTime t = sim.run(prog);
    StagePhaseCost sc;
    sc.chunk = st.chunk;
    sc.f = t.phase_s(0);
    const size_t phases = t.compute_s.size();
    sc.bi = phases > 1 ? t.phase_s(1) : 0;
    sc.bw = phases > 2 ? t.phase_s(2) : 0;
    double grads = 0;
    for (ValueId v : st.param_grads) grads += value_bytes(prog.graph(), v);
    sc.accumulate = sim.memory(3 * grads);
    for (ValueId v : st.activations_out) sc.act_bytes += value_bytes(prog.graph(), v);
    for (ValueId v : st.gradients_out) sc.grad_bytes += value_bytes(prog.graph(), v);
    for (int ph = 0; ph < static_cast<int>(t.blocking_s.size()); ++ph)
      for (const auto& [axis, s] : t.blocking_s[ph]) (ph == 0 ? sc.comm_f : sc.comm_b)[axis] += s;
    out.push_back(sc);
  }
  return out;
}

}  // namespace tessel::plan
