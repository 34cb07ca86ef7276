#include "tessel/plan/model/pipeline_timeline.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "tessel/base/error.h"
#include "tessel/compile/zero.h"
#include "tessel/plan/model/data_parallel_overlap.h"
#include "tessel/schedule/schedule_check.h"

namespace tessel::plan {
namespace {

// A stage's phase costs, the accumulation folded into `bw` (it ends each
// backward-weight action).
struct StageCost : StagePhaseCost {
  // Polled progress: the sender's share of copying its sends, charged to
  // the action that produces them (F: activations, B/BI: gradients).
  double send_f = 0, send_b = 0;
};
// Per pipeline rank: its chunks' costs and the elements it holds.
struct RankCosts {
  std::vector<StageCost> chunks;
  double held = 0, state = 0, tied = 0;
};

// The costs of a pipeline rank that `c` (one of `reps`) was compiled for.
RankCosts compiled_rank_costs(const std::vector<CompiledRank>& reps, const CompiledRank& c,
                              const Simulator& sim, std::optional<int> pipe_axis,
                              StagePhaseMemo* memo) {
  RankCosts rc;
  std::optional<std::vector<StagePhaseCost>> own;  // without a memo
  if (memo) memo->resize(reps.size());             // by the rank's index in `reps`
  std::optional<std::vector<StagePhaseCost>>& phases = memo ? (*memo)[&c - reps.data()] : own;
  if (!phases) phases = phase_costs(c, sim);
  for (const StagePhaseCost& phase : *phases) {
    StageCost sc;
    static_cast<StagePhaseCost&>(sc) = phase;
    sc.bw += sc.accumulate;
    sc.accumulate = 0;
    if (sim.polled() && pipe_axis) {
      const double keep = 1 - sim.progress().send_overlap;
      sc.send_f = sc.act_bytes > 0 ? keep * sim.p2p(sc.act_bytes, *pipe_axis) : 0;
      sc.send_b = sc.grad_bytes > 0 ? keep * sim.p2p(sc.grad_bytes, *pipe_axis) : 0;
    }
    if (static_cast<int>(rc.chunks.size()) <= sc.chunk) rc.chunks.resize(sc.chunk + 1);
    rc.chunks[sc.chunk] = sc;
  }
  for (const PipelineParam& q : c.pipeline->params()) {
    if (!q.held) continue;
    const double n = static_cast<double>(q.sharding.local_shape(q.shape, c.mesh).numel());
    rc.held += n;
    rc.state += q.zero ? static_cast<double>(q.zero->chunk()) : n;
    if (q.pipe_ranks.size() > 1) rc.tied += n;
  }
  return rc;
}

// Ranks not compiled hold middle stages only: a compiled middle rank's
// costs, scaled by each chunk's block count (the partition is known).
void stand_in_rank_costs(std::vector<RankCosts>& cost,
                         const std::vector<const CompiledRank*>& by_pipe,
                         const StagePartition& part, const Schedule& schedule) {
  const int p = static_cast<int>(cost.size());
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
      sc.f *= ratio, sc.bi *= ratio, sc.bw *= ratio, sc.poll_interval *= ratio;
      sc.param_grad_bytes *= ratio, sc.weight_copies *= ratio;
      for (auto* comm : {&sc.comm_f, &sc.comm_b})
        for (auto& [axis, v] : *comm) v *= ratio;
      ratio_sum += ratio;
    }
    const double mean = ratio_sum / static_cast<double>(std::max<size_t>(1, cost[r].chunks.size()));
    cost[r].held *= mean;
    cost[r].state *= mean;
  }
}

// The sender's copying of a send (polled progress), charged to the action before it.
double send_charge(const RankCosts& rc, const Action& a) {
  const StageCost& sc = rc.chunks[a.chunk];
  if (a.kind == ActionKind::kForward) return sc.send_f;
  if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) return sc.send_b;
  return 0.0;
}

// The schedule's timeline from each action's cost, with the co-run factors
// (PipelineCoRun) applied and, under `co.overlap`, corrected pass by pass.
SimulatedTimeline simulate_pipeline(const Schedule& schedule, const std::vector<RankCosts>& cost,
                                    const Simulator& sim, std::optional<int> pipe_axis,
                                    const PipelineCoRun& co) {
  std::map<CoRunKey, double> slower;  // co-run factors per action, under co.overlap
  ActionCosts costs;
  costs.compute = [&](int r, const Action& a) {
    const StageCost& sc = cost[r].chunks[a.chunk];
    const double t = action_cost(a.kind, UnitCosts{sc.f, sc.bi, sc.bw}) + send_charge(cost[r], a);
    if (co.overlap) {
      const auto it = slower.find(co_run_key(r, a));
      return it == slower.end() ? t : it->second * t;
    }
    return co.uniform == 1 ? t : co.uniform * t;
  };
  // Background progress: the message's own time. Polled: the sender's polls
  // between the instructions of whatever it runs next move it, poll_bytes
  // per poll, so it takes at least that many of its instruction intervals.
  costs.transfer = [&](int r, const Action& a) {
    const StageCost& sc = cost[r].chunks[a.chunk];
    const double bytes = a.kind == ActionKind::kSendActivation ? sc.act_bytes : sc.grad_bytes;
    if (!pipe_axis || bytes <= 0) return 0.0;
    const double wire = sim.p2p(bytes, *pipe_axis);
    if (!sim.polled()) return wire;
    const double polls = std::ceil(bytes / sim.progress().send_poll_bytes);
    return std::max(wire, polls * sc.poll_interval);
  };
  SimulatedTimeline timeline = simulate_schedule(schedule, costs);
  for (int pass = 0; co.overlap && pass < kCoRunPasses; ++pass) {
    slower = co_run_factors(timeline, schedule.ranks, co);
    SimulatedTimeline again = simulate_checked_schedule(schedule, costs);
    const bool settled = std::abs(again.makespan - timeline.makespan) <= 1e-6 * timeline.makespan;
    timeline = std::move(again);
    if (settled) break;
  }
  return timeline;
}

// Rank r's chunks as data_parallel_overlap.h takes them: when each chunk's
// gradients are complete and its first forward starts in `timeline`, and
// its reduction and gather, the rank's `held` and `state` elements split in
// proportion to the chunks' parameter-gradient bytes.
template <typename Reduce, typename Gather>
std::vector<ChunkDataWork> chunk_data_work(int r, const SimulatedTimeline& timeline,
                                           const RankCosts& rc, Reduce reduce, Gather gather) {
  const size_t n = rc.chunks.size();
  std::vector<ChunkDataWork> work(n);
  std::vector<bool> seen(n, false);
  for (const SimulatedTimeline::Event& e : timeline.events) {
    if (e.rank != r) continue;
    ChunkDataWork& w = work[e.action.chunk];
    if (e.action.kind == ActionKind::kForward && !seen[e.action.chunk]) {
      w.first_forward_s = e.start;
      seen[e.action.chunk] = true;
    }
    if (e.action.kind == ActionKind::kBackward || e.action.kind == ActionKind::kBackwardWeight)
      w.grads_ready_s = std::max(w.grads_ready_s, e.end);
  }
  double bytes = 0;
  for (const StageCost& sc : rc.chunks) bytes += sc.param_grad_bytes;
  for (size_t c = 0; c < n; ++c) {
    const double share = bytes > 0 ? rc.chunks[c].param_grad_bytes / bytes : 1.0 / n;
    work[c].reduce_s = reduce(share * rc.held);
    work[c].gather_s = gather(share * rc.state);
  }
  return work;
}

// Pipeline rank r's step: its actions' compute and blocking communication
// from the timeline, its bubble, then the per-step work after the schedule.
RankStep pipeline_rank_step(int r, const SimulatedTimeline& timeline, const RankCosts& rc,
                            const CompiledRank& any, std::optional<int> pipe_axis,
                            const Simulator& sim, const Simulator& post_sim) {
  RankStep s;
  double busy = 0;
  for (const SimulatedTimeline::Event& e : timeline.events)
    if (e.rank == r) {
      busy += e.end - e.start;
      const StageCost& sc = rc.chunks[e.action.chunk];
      const auto& comm = e.action.kind == ActionKind::kForward ? sc.comm_f : sc.comm_b;
      for (const auto& [axis, t] : comm) busy -= s.expose(axis, t);
      if (const double send = send_charge(rc, e.action); send > 0)
        busy -= s.expose(any.mesh.axis(*pipe_axis).name, send);
    }
  // The shared weight copies, rounded from host memory once a step (offload
  // "weights"), delay the rank's first forwards: charged as its compute.
  double copies = 0;
  for (const StageCost& sc : rc.chunks) copies += sc.weight_copies;
  s.compute_s = busy + copies;
  s.bubble_s = timeline.makespan * (timeline.bubble_fraction[r]);
  // After the schedule: the accumulators' data-axis reduction (or
  // reduce-scatter under ZeRO, and after the update the all-gather of the
  // updated chunks), the tied parameters' pipe-axis sum (both
  // exposed communication on their axes), the update (optimizer time).
  double post = 0;
  if (!any.pipeline->data_axis().empty()) {
    const std::string& axis = any.pipeline->data_axis();
    const bool zero = any.config.zero > 0;
    // ZeRO: reduce-scattered, and after the update the updated chunks
    // all-gathered back into the parameters.
    auto reduce = [&](double elements) {
      return sim.collective(zero ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                            4 * elements, axis);
    };
    auto gather = [&](double elements) {
      return zero ? sim.collective(CollectiveKind::kAllGather, 4 * elements, axis) +
                        sim.memory(8 * elements)
                  : 0.0;
    };
    if (sim.options().overlap_data_parallel && !sim.polled()) {
      const OverlappedDataWork w =
          overlapped_data_work(chunk_data_work(r, timeline, rc, reduce, gather), timeline.makespan);
      s.comm_s[axis] += w.comm_s;
      s.exposed_s[axis] += w.reduce_exposed_s + w.gather_exposed_s;
      post += w.reduce_exposed_s + w.gather_exposed_s;
    } else {
      post += s.expose(axis, reduce(rc.held) + gather(rc.state));
    }
  }
  if (rc.tied > 0 && pipe_axis)
    post += s.expose("pipe", sim.collective(CollectiveKind::kAllReduce, 4 * rc.tied, "pipe"));
  s.optimizer_s = post_sim.update(rc.state, any.config);
  s.end_s = timeline.makespan + copies + post + s.optimizer_s;
  return s;
}

}  // namespace

std::vector<RankStep> pipeline_steps(const std::vector<CompiledRank>& reps,
                                     const Schedule& schedule, const Simulator& sim,
                                     const Simulator& post_sim, double share,
                                     const PipelineCoRun& co, StagePhaseMemo* memo) {
  const PipelineModel& first = *reps.front().pipeline;
  const int p = schedule.ranks;
  const std::optional<int> pipe_axis = first.pipe_axis();
  std::vector<const CompiledRank*> by_pipe(p, nullptr);
  for (const CompiledRank& c : reps)
    if (!by_pipe[c.pipeline->pipe_rank()]) by_pipe[c.pipeline->pipe_rank()] = &c;
  TS_CHECK(by_pipe[0] && by_pipe[p - 1],
           "cost model: no representative for the first or last pipeline rank");
  std::vector<RankCosts> cost(p);
  for (int r = 0; r < p; ++r)
    if (by_pipe[r]) cost[r] = compiled_rank_costs(reps, *by_pipe[r], sim, pipe_axis, memo);
  stand_in_rank_costs(cost, by_pipe, first.partition(), schedule);
  const SimulatedTimeline timeline = simulate_pipeline(schedule, cost, sim, pipe_axis, co);
  std::vector<RankStep> steps;
  for (int r = 0; r < p; ++r)
    steps.push_back(
        pipeline_rank_step(r, timeline, cost[r], *by_pipe[0], pipe_axis, sim, post_sim));
  if (share > 1) {
    // Oversubscribed: the cores' work, every rank's compute spread evenly.
    double busy = 0;
    for (const RankStep& s : steps) busy += s.compute_s;
    const double extra = std::max(0.0, share * busy / p - timeline.makespan);
    for (RankStep& s : steps) {
      s.compute_s += extra;
      s.end_s += extra;
    }
  }
  return steps;
}

}  // namespace tessel::plan
