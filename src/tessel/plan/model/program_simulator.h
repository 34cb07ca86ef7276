// Internal to plan/model: the simulator of one program's instructions on a
// HardwareModel (kernels, blocking collectives, gradient buckets under
// background or polled progress, ring attention), and a rank's step from
// it. cost_model.cc and pipeline_timeline.cc use it; cost_model.h states
// what it charges.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/compile/zero.h"
#include "tessel/ir/attrs.h"
#include "tessel/plan/model/bf16_all_reduce_cost.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/sharding/context_parallel.h"

namespace tessel::plan {

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
  // `pinned`: the link of every collective and message, whatever their axes.
  Simulator(const Mesh& mesh, const HardwareModel& hw, const CostOptions& options, double share,
            std::optional<Link> pinned = std::nullopt)
      : mesh_(mesh),
        hw_(hw),
        options_(options),
        share_(share),
        pinned_(pinned),
        progress_(hw.progress()) {}
  Simulator with_share(double share) const {
    return Simulator(mesh_, hw_, options_, share, pinned_);
  }

  const CommProgress& progress() const { return progress_; }
  const CostOptions& options() const { return options_; }
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
    return hw_.collective_seconds(kind, bytes, ranks, link_of(a));
  }

  // One compute instruction (instruction_seconds) on a core it shares with
  // share_ ranks' work (a cluster's devices share nothing: share_ 1).
  double kernel(const Graph& g, const Program::InstructionInfo& ins) const {
    return share_ * instruction_seconds(hw_, g, ins, options_);
  }

  // Reading `bytes` of parameter storage where offload keeps it on the host.
  double host_reads(double bytes) const {
    return options_.weights_on_host ? share_ * hw_.host_copy_seconds(bytes, options_.threads) : 0;
  }

  // Ring attention (backend/cpu/ring_attention.h): n steps, each the longer
  // of the kernel's work (causal, balanced: half a chunk pair; else a pair)
  // and the next chunk's send (the last sends nothing). The backward's
  // ring passes k, v, dk, dv (its deltas need no products), then dk, dv
  // go home. The balancing's moves are exposed. Returns {compute, exposed
  // communication}.
  std::pair<double, double> ring_attention(const Graph& g,
                                           const Program::InstructionInfo& ins) const {
    const Node& n = g.node(ins.node);
    const int ranks = static_cast<int>(n.attrs.count);
    const double pair = (causal_query_dim(n.attrs).empty() ? 1.0 : 0.5) * kernel(g, ins);
    const double chunk = value_bytes(g, n.inputs[1]);
    const Link link = link_of(mesh_.axis_index(n.attrs.axis));
    double compute = 0, exposed = hw_.p2p_seconds(ring_balance_bytes_sent(g, n), link);
    auto ring = [&](double per_pair, double bytes) {
      const double send = hw_.p2p_seconds(bytes, link);
      compute += ranks * per_pair;
      exposed += (ranks - 1) * std::max(0.0, send - per_pair);
    };
    if (n.kind == OpKind::kAttention) {
      ring(pair, 2 * chunk);
    } else {
      ring(pair, 4 * chunk);
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
      } else if (is_attention_op(n.kind) && !n.attrs.axis.empty()) {  // ring attention
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

  // optimizer_seconds over the world, on the pinned link if any.
  double update(double state, const TrainConfig& config) const {
    const int world = mesh_.rank_count();
    return optimizer_seconds(
        hw_, config, options_.threads, state, share_, world,
        pinned_.value_or(world <= hw_.devices_per_node() ? Link::kIntraNode : Link::kInterNode));
  }

  // One point-to-point message on `axis` (pipeline transfers).
  double p2p(double bytes, int axis) const { return hw_.p2p_seconds(bytes, link_of(axis)); }

 private:
  Link link_of(int axis) const {
    return pinned_ ? *pinned_ : link_of_axis(mesh_, axis, hw_.devices_per_node());
  }

  const Mesh& mesh_;
  const HardwareModel& hw_;
  CostOptions options_;
  double share_ = 1;
  std::optional<Link> pinned_;
  CommProgress progress_;
};

struct RankStep {
  double end_s = 0;  // the rank's step time
  double compute_s = 0, optimizer_s = 0, bubble_s = 0;
  std::map<std::string, double> comm_s, exposed_s;
  // Communication on `axis`, all of it exposed; returns `s`.
  double expose(const std::string& axis, double s) {
    comm_s[axis] += s;
    exposed_s[axis] += s;
    return s;
  }
};

// A single program's step on `sim`: its instructions, feed, ZeRO gathers
// and update.
RankStep single_program_step(const CompiledRank& c, const Simulator& sim);

// Each compiled stage's phase costs on `sim`: what pipeline_steps and
// stage_phase_costs (the screening) both charge a stage per micro-batch.
std::vector<StagePhaseCost> phase_costs(const CompiledRank& c, const Simulator& sim);

}  // namespace tessel::plan
