#include "tessel/plan/model/cost_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <tuple>

#include "tessel/base/error.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/zero.h"
#include "tessel/plan/model/bf16_all_reduce_cost.h"
#include "tessel/plan/model/device_einsum.h"
#include "tessel/schedule/schedule_check.h"

namespace tessel::plan {
namespace {

// One program's instructions on the hardware, phase by phase.
struct ProgramTime {
  std::vector<double> compute_s;  // per phase: kernels
  std::vector<std::map<std::string, double>>
      blocking_s;                                  // per phase, per axis: blocking collectives
  std::map<std::string, double> bucket_s;          // per axis: bucketed all-reduces
  std::map<std::string, double> bucket_exposed_s;  // per axis: charged to the rank or waited for
  std::vector<double> charged_s;  // per phase: polled buckets' copies charged to the rank
  double end_s = 0;               // the whole program, bucket waits included
  int polls = 0;                  // instructions that poll (all but bucket copies)
  double phase_s(int phase) const {
    double t = compute_s[phase] + charged_s[phase];
    for (const auto& [axis, s] : blocking_s[phase]) t += s;
    return t;
  }
};

// A gradient bucket's all-reduce in flight under polled progress.
struct PolledBucket {
  double start = 0;   // when it can progress (issued, and the one before it done)
  double d = 0;       // its time alone
  double needed = 1;  // polls it takes
  double polls = 0;   // polls done
};

class Simulator {
 public:
  // `share`: what the kernels' and memory passes' times are multiplied by:
  // the ranks per core (HardwareModel::compute_share), times the co-run
  // factor where other ranks of the node compute beside this one.
  Simulator(const Mesh& mesh, const HardwareModel& hw, const CostOptions& options, double share)
      : mesh_(mesh),
        hw_(hw),
        options_(options),
        share_(share),
        progress_(hw.progress()),
        einsum_costing_(hw.einsum_costing()) {}
  Simulator with_share(double share) const { return Simulator(mesh_, hw_, options_, share); }

  const CommProgress& progress() const { return progress_; }
  bool polled() const { return progress_.mode == CommProgress::Mode::kPolled; }

  double memory(double bytes) const {
    return bytes > 0 ? share_ * hw_.memory_seconds(bytes, options_.threads) : 0;
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
    if (ins.einsum) return share_ * einsum_seconds(hw_, g, ins, options_);
    double bytes = value_bytes(g, ins.node);
    for (ValueId in : n.inputs) bytes += value_bytes(g, in);
    return share_ * hw_.kernel_seconds(op_name(n.kind), bytes, g.node_flops(ins.node),
                                       options_.precision, options_.threads);
  }

  static bool is_ring_attention_node(const Node& n) {
    return (n.kind == OpKind::kAttention || n.kind == OpKind::kAttentionGrad) &&
           !n.attrs.axis.empty();
  }

  // Ring attention (context parallelism, backend/cpu/ring_attention.h): n
  // steps, each one chunk pair's kernel beside the send of the next chunk;
  // a step takes the longer of the two (the last sends nothing). Without
  // load balancing some rank computes at every step (causal chunks above
  // the diagonal are skipped on some ranks, never on all), so every step
  // costs a pair. The backward runs the ring twice: the deltas (2 of its 7
  // block products) passing k, v; then the gradients passing k, v, dk, dv;
  // then dk, dv home. Returns {compute, exposed communication}.
  std::pair<double, double> ring_attention(const Graph& g,
                                           const Program::InstructionInfo& ins) const {
    const Node& n = g.node(ins.node);
    const int ranks = static_cast<int>(n.attrs.count);
    const double pair = kernel(g, ins), chunk = value_bytes(g, n.inputs[1]);
    const Link link = link_of_axis(mesh_, mesh_.axis_index(n.attrs.axis), hw_.devices_per_node());
    double compute = 0, exposed = 0;
    auto ring = [&](double per_pair, double bytes) {
      const double send = hw_.p2p_seconds(bytes, link);
      compute += ranks * per_pair;
      exposed += (ranks - 1) * std::max(0.0, send - per_pair);
    };
    if (n.kind == OpKind::kAttention) {
      ring(pair, 2 * chunk);
    } else {
      ring(pair * 2 / 7, 2 * chunk);
      ring(pair * 5 / 7, 4 * chunk);
      exposed += hw_.p2p_seconds(2 * chunk, link);
    }
    return {compute, exposed};
  }

  // A blocking collective node of a local graph (its kind and payload as
  // the Communicator counts them: 2 bytes per element where it carries bf16).
  double collective_node(const Graph& g, const Program::InstructionInfo& ins) const {
    const ValueId id = ins.node;
    const Node& n = g.node(id);
    const double in =
        ins.carries_bf16 ? 2.0 * g.node(n.inputs[0]).shape.numel() : value_bytes(g, n.inputs[0]);
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

  // A bf16 gradient bucket of `f32_bytes` (bf16_all_reduce_cost.h).
  double bf16_bucket(double f32_bytes, const std::string& axis) const {
    const int a = mesh_.axis_index(axis);
    TS_CHECK(a >= 0, "cost model: bucket on axis '", axis, "', which mesh ", mesh_.to_string(),
             " lacks");
    return bf16_all_reduce_seconds(
        f32_bytes, mesh_.axis(a).size,
        [&](CollectiveKind kind, double bytes) { return collective(kind, bytes, axis); },
        [&](double bytes) { return memory(bytes); });
  }

  ProgramTime run(const Program& p) const {
    const Graph& g = p.graph();
    const std::vector<Program::InstructionInfo> list = p.instruction_info();
    const std::vector<Program::BucketInfo> buckets = p.bucket_info();
    ProgramTime t;
    const int phases = std::max(1, p.phase_count());
    t.compute_s.assign(phases, 0);
    t.blocking_s.assign(phases, {});
    t.charged_s.assign(phases, 0);
    double clock = 0;
    std::map<std::string, double> channel_free;  // background: when each axis's channel is idle
    std::map<std::string, std::deque<PolledBucket>> queue;  // polled: buckets in flight per axis
    const CommProgress& pr = progress_;
    for (size_t i = 0; i < list.size(); ++i) {
      const Program::InstructionInfo& ins = list[i];
      const Node& n = g.node(ins.node);
      double dt = 0;
      if (ins.bucket >= 0) {
        dt = memory(2 * value_bytes(g, ins.node));  // the copy into the bucket
        t.compute_s[ins.phase] += dt;
        clock += dt;
        const Program::BucketInfo& b = buckets[ins.bucket];
        if (b.last_instruction == static_cast<int>(i) && b.bf16) {
          // The runtime reduces a bf16 bucket blocking, at its last member
          // (Communicator::all_reduce_bf16): on the critical path in either
          // progress mode, never overlapped.
          const double d = bf16_bucket(static_cast<double>(b.bytes), b.axis);
          t.blocking_s[ins.phase][b.axis] += d;
          clock += d;
        } else if (b.last_instruction == static_cast<int>(i)) {
          const double bytes = static_cast<double>(b.bytes);
          double d = collective(CollectiveKind::kAllReduce, bytes, b.axis);
          if (polled()) {
            d *= pr.nonblocking_factor;
            auto& q = queue[b.axis];
            q.push_back({clock, d, std::max(1.0, std::ceil(bytes / pr.all_reduce_poll_bytes)), 0});
          } else {
            double& free = channel_free[b.axis];
            free = std::max(free, clock) + d;
          }
          t.bucket_s[b.axis] += d;
        }
        continue;
      }
      // The runtime tests every pending bucket before each other instruction.
      ++t.polls;
      for (auto& [axis, q] : queue) {
        if (q.empty() || q.front().start > clock) continue;
        PolledBucket& head = q.front();
        head.polls += 1;
        const double charge = (1 - pr.all_reduce_overlap) * head.d / head.needed;
        clock += charge;
        t.charged_s[ins.phase] += charge;
        t.bucket_exposed_s[axis] += charge;
        if (head.polls >= head.needed && clock >= head.start + pr.all_reduce_overlap * head.d) {
          q.pop_front();
          if (!q.empty()) q.front().start = std::max(q.front().start, clock);
        }
      }
      if (communicates(n.kind)) {
        dt = collective_node(g, ins);
        t.blocking_s[ins.phase][n.attrs.axis] += dt;
      } else if (is_ring_attention_node(n)) {
        const auto [compute, exposed] = ring_attention(g, ins);
        t.compute_s[ins.phase] += compute;
        t.blocking_s[ins.phase][n.attrs.axis] += exposed;
        dt = compute + exposed;
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
    // Polled: the final waits finish what the polls did not, at the
    // collective's own speed, one axis after another (the runtime waits for
    // the buckets in order).
    for (auto& [axis, q] : queue) {
      double at = t.end_s;
      for (PolledBucket& b : q) {
        const double left = 1 - std::min(1.0, b.polls / b.needed);
        at = std::max({at, b.start + (left > 0 ? 0 : pr.all_reduce_overlap * b.d)}) + left * b.d;
      }
      t.bucket_exposed_s[axis] += at - t.end_s;
      t.end_s = at;
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
  double share_ = 1;
  CommProgress progress_;
  EinsumCosting einsum_costing_;
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
  // The update over this rank's state (ZeRO: its flat chunks), and the
  // ZeRO gathers of the updated chunks (exposed communication on the data
  // axis, not optimizer time: each part of the step is counted once).
  const Graph& g = c.train.global;
  double state = 0, gathers = 0;
  const int zero_axis = c.config.zero > 0 ? c.layout.axis_of("batch") : -1;
  for (size_t i = 0; i < g.params().size(); ++i) {
    const ValueId p = g.params()[i];
    const Shape& shape = g.node(p).shape;
    const Sharding& value = c.train.local.sharding_of[p];
    const int64_t held = value.local_shape(shape, c.mesh).numel();
    // A parameter ZeRO-3 stores as its shard is updated whole (compile/zero.h).
    const std::optional<FlatShard> zero = zero_axis >= 0 && !value[zero_axis].is_split()
                                              ? flat_shard(held, c.mesh, zero_axis)
                                              : std::nullopt;
    const int64_t n = zero ? zero->chunk() : held;
    state += static_cast<double>(n);
    if (zero) {
      const std::string& axis = c.mesh.axis(zero_axis).name;
      const double gather =
          sim.collective(CollectiveKind::kAllGather, 4.0 * n, axis) + sim.memory(8.0 * n);
      r.comm_s[axis] += gather;
      r.exposed_s[axis] += gather;
      gathers += gather;
    }
  }
  r.optimizer_s = sim.update(state, c.config.optimizer);
  r.end_s = t.end_s + sim.memory(feed) + gathers + r.optimizer_s;
  return r;
}

// Each compiled stage's phase costs on `sim`: what pipeline_steps and
// stage_phase_costs (the screening) both charge a stage per micro-batch.
std::vector<StagePhaseCost> phase_costs(const CompiledRank& c, const Simulator& sim) {
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
    sc.accumulate = sim.memory(3 * grads);  // into the stage's accumulators
    for (ValueId v : st.activations_out) sc.act_bytes += value_bytes(prog.graph(), v);
    for (ValueId v : st.gradients_out) sc.grad_bytes += value_bytes(prog.graph(), v);
    for (int ph = 0; ph < static_cast<int>(t.blocking_s.size()); ++ph)
      for (const auto& [axis, s] : t.blocking_s[ph]) (ph == 0 ? sc.comm_f : sc.comm_b)[axis] += s;
    sc.poll_interval = (sc.f + sc.bi + sc.bw + sc.accumulate) / std::max(1, t.polls);
    out.push_back(sc);
  }
  return out;
}

// A pipelined configuration: phase times of every representative's stages
// drive the schedule simulator; then each rank's per-step reductions and update.
// `sim` times the stages as if each rank had its own core; `post` (its
// share of a core applied) the per-step work after the schedule, when every
// rank computes at once. Ranks sharing a core fill each other's bubbles: the
// makespan is at least the cores' work, share x the mean busy time.
//
// Co-run (`co`): a rank's actions run slower while the other ranks of its
// node are busy. With `co.overlap` (a pipeline alone on its node, each rank
// on its own core) an action's factor is polling + (computing - polling) x
// o, o the share of its time during which another pipeline rank runs an
// action in the previous pass of the simulation (the others wait in their
// blocking receives, polling, the rest of the time): the schedule is
// simulated with factor 1, then again with each action's factor from the
// pass before, until the makespan settles (at most kCoRunPasses
// corrections). Without it every action takes `co.uniform`.
struct PipelineCoRun {
  double uniform = 1;
  bool overlap = false;
  double computing = 1, polling = 1;
};
constexpr int kCoRunPasses = 4;

// The share of [start, end) covered by the union of `others` (intervals).
double covered_share(double start, double end,
                     const std::vector<std::pair<double, double>>& others) {
  if (end <= start) return 0;
  std::vector<std::pair<double, double>> in;
  for (const auto& [a, b] : others)
    if (b > start && a < end) in.emplace_back(std::max(a, start), std::min(b, end));
  std::sort(in.begin(), in.end());
  double covered = 0, reach = start;
  for (const auto& [a, b] : in) {
    if (b <= reach) continue;
    covered += b - std::max(a, reach);
    reach = b;
  }
  return covered / (end - start);
}

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
  std::vector<StagePhaseCost> own;
  const std::vector<StagePhaseCost>* phases = &own;
  if (memo) {  // by the rank's index in `reps`
    memo->resize(reps.size());
    auto& kept = (*memo)[&c - reps.data()];
    if (!kept) kept = phase_costs(c, sim);
    phases = &*kept;
  } else {
    own = phase_costs(c, sim);
  }
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
  const int p = schedule.ranks;
  // Co-run factors per action, by (rank, kind, micro-batch, chunk).
  using ActionKey = std::tuple<int, int, int, int>;
  auto key_of = [](int r, const Action& a) {
    return ActionKey{r, static_cast<int>(a.kind), a.microbatch, a.chunk};
  };
  std::map<ActionKey, double> slower;
  ActionCosts costs;
  costs.compute = [&](int r, const Action& a) {
    const StageCost& sc = cost[r].chunks[a.chunk];
    const double t = action_cost(a.kind, UnitCosts{sc.f, sc.bi, sc.bw}) + send_charge(cost[r], a);
    if (co.overlap) {
      const auto it = slower.find(key_of(r, a));
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
    std::vector<std::vector<std::pair<double, double>>> busy_of(p);
    for (const SimulatedTimeline::Event& e : timeline.events)
      busy_of[e.rank].emplace_back(e.start, e.end);
    std::map<ActionKey, double> next;
    for (const SimulatedTimeline::Event& e : timeline.events) {
      std::vector<std::pair<double, double>> others;
      for (int q = 0; q < p; ++q)
        if (q != e.rank) others.insert(others.end(), busy_of[q].begin(), busy_of[q].end());
      const double o = covered_share(e.start, e.end, others);
      next[key_of(e.rank, e.action)] = co.polling + (co.computing - co.polling) * o;
    }
    slower = std::move(next);
    SimulatedTimeline again = simulate_checked_schedule(schedule, costs);
    const bool settled = std::abs(again.makespan - timeline.makespan) <= 1e-6 * timeline.makespan;
    timeline = std::move(again);
    if (settled) break;
  }
  return timeline;
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
      for (const auto& [axis, t] : comm) {
        s.comm_s[axis] += t;
        s.exposed_s[axis] += t;
        busy -= t;
      }
      if (const double send = send_charge(rc, e.action); send > 0) {
        const std::string& axis = any.mesh.axis(*pipe_axis).name;
        s.comm_s[axis] += send;
        s.exposed_s[axis] += send;
        busy -= send;
      }
    }
  s.compute_s = busy;
  s.bubble_s = timeline.makespan * (timeline.bubble_fraction[r]);
  // After the schedule: the accumulators' data-axis reduction (or
  // reduce-scatter under ZeRO, and after the update the all-gather of the
  // updated chunks), the tied parameters' pipe-axis sum (both
  // exposed communication on their axes), the update (optimizer time).
  const double held = rc.held, state = rc.state, tied = rc.tied;
  double post = 0;
  if (!any.pipeline->data_axis().empty()) {
    const std::string& axis = any.pipeline->data_axis();
    double d = any.config.zero > 0 ? sim.collective(CollectiveKind::kReduceScatter, 4 * held, axis)
                                   : sim.collective(CollectiveKind::kAllReduce, 4 * held, axis);
    // ZeRO: the updated chunks all-gathered back into the parameters.
    if (any.config.zero > 0)
      d += sim.collective(CollectiveKind::kAllGather, 4 * state, axis) + sim.memory(8 * state);
    s.comm_s[axis] += d;
    s.exposed_s[axis] += d;
    post += d;
  }
  if (tied > 0 && pipe_axis) {
    const double d = sim.collective(CollectiveKind::kAllReduce, 4 * tied, "pipe");
    s.comm_s["pipe"] += d;
    s.exposed_s["pipe"] += d;
    post += d;
  }
  s.optimizer_s = post_sim.update(state, any.config.optimizer);
  s.end_s = timeline.makespan + post + s.optimizer_s;
  return s;
}

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
           "cost model: no representative for the first or last "
           "pipeline rank");
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

}  // namespace

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
    const int64_t bytes = m.total() - (hw.host_buffers_on_device() ? 0 : m.host.total());
    if (bytes > out.peak_bytes) out.peak_bytes = bytes, out.peak_rank = c.rank;
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
  const Simulator sim(mesh, hw, options, share * busy);
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
                                              const CostOptions& options) {
  TS_CHECK(c.pipelined(), "stage_phase_costs: rank ", c.rank, " is not pipelined");
  return phase_costs(c, Simulator(c.mesh, hw, options, 1.0));
}

}  // namespace tessel::plan
