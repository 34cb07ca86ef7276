// The planner's cost model and search against a synthetic hardware model
// whose times are simple formulas: the step decomposes into its parts,
// memory is the dry run's, overlap and links behave as documented, and the
// search prunes, fixes knobs and ranks as it says.
#include "tessel/plan/model/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/error_of.h"
#include "common/plan_order.h"
#include "common/tiny_gpt.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/plan/model/kernel_work.h"
#include "tessel/plan/search/search.h"
#include "tessel/schedule/schedule.h"

namespace tessel::plan {
namespace {

// 10 GFLOP/s, 10 GB/s, links 10 us + 1 GB/s; nodes of `per_node` devices.
class FakeHardware : public HardwareModel {
 public:
  explicit FakeHardware(int per_node = 8, double link_gbs = 1)
      : per_node_(per_node), link_(link_gbs) {}
  std::string name() const override { return "fake"; }
  double gemm_seconds(int64_t b, int64_t m, int64_t n, int64_t k, Precision, int) const override {
    return 2.0 * b * m * n * k / 1e10;
  }
  double memory_seconds(double bytes, int) const override { return bytes / 1e10; }
  double collective_seconds(CollectiveKind, double bytes, int ranks, Link link) const override {
    return (link == Link::kIntraNode ? 1 : 10) * (1e-5 + bytes / (link_ * 1e9)) * (ranks - 1) /
           ranks;
  }
  double p2p_seconds(double bytes, Link) const override { return 1e-5 + bytes / (link_ * 1e9); }
  int devices_per_node() const override { return per_node_; }
  int total_devices() const override { return 64; }
  int64_t device_memory_bytes() const override { return 0; }
  double peak_flops(Precision, int) const override { return 1e10; }

 private:
  int per_node_;
  double link_;
};

TrainConfig tiny(const std::string& mesh) {
  TrainConfig c = tiny_gpt_config(2, 8);
  c.mesh = mesh;
  return c;
}

double sum(const std::map<std::string, double>& m) {
  double t = 0;
  for (const auto& [k, v] : m) t += v;
  return t;
}

int64_t worst_predicted(const TrainConfig& c) {
  int64_t worst = 0;
  for (const RankMemory& m : predict_memory(c)) worst = std::max(worst, m.total());
  return worst;
}

TEST(CostModel, StepIsComputePlusExposedCommunicationPlusBubblePlusOptimizer) {
  const FakeHardware hw;
  for (const char* mesh : {"", "data=2", "model=2", "data=2,model=2"}) {
    const TrainConfig c = tiny(mesh);
    const StepPrediction p =
        predict_step(c, representative_ranks(Mesh::parse(mesh), false), hw, {});
    EXPECT_GT(p.compute_s, 0) << mesh;
    EXPECT_NEAR(p.step_s, p.compute_s + sum(p.exposed_comm_s) + p.bubble_s + p.optimizer_s, 1e-12)
        << mesh;
    for (const auto& [axis, t] : p.exposed_comm_s) EXPECT_LE(t, p.comm_s.at(axis) + 1e-15);
  }
}

// ZeRO's gathers and a pipeline's reductions after the schedule are
// communication: counted once, as exposed communication on their axis, not
// also as optimizer time (they were both once, and the parts summed to more
// than the step). On links 1000x slower they grow; the optimizer does not
// (but for its 4-byte gradient-norm all-reduce).
TEST(CostModel, PostStepCommunicationIsExposedCommunicationNotOptimizerTime) {
  struct Case {
    const char* mesh;
    int zero, microbatches;
    const char* axis;
  };
  for (const Case& k : {Case{"data=2", 1, 1, "data"}, Case{"data=2", 2, 1, "data"},
                        Case{"data=2", 3, 1, "data"}, Case{"pipe=2", 0, 2, "pipe"},
                        Case{"pipe=2,data=2", 0, 2, "data"}, Case{"pipe=2,data=2", 1, 2, "data"}}) {
    TrainConfig c = tiny(k.mesh);
    c.zero = k.zero;
    c.microbatches = k.microbatches;
    const std::vector<int> ranks = representative_ranks(Mesh::parse(k.mesh), true);
    const StepPrediction fast = predict_step(c, ranks, FakeHardware(8, 1), {});
    const StepPrediction slow = predict_step(c, ranks, FakeHardware(8, 0.001), {});
    for (const StepPrediction* p : {&fast, &slow})
      EXPECT_NEAR(p->step_s, p->compute_s + sum(p->exposed_comm_s) + p->bubble_s + p->optimizer_s,
                  1e-9)
          << k.mesh << " zero " << k.zero;
    const double extra = slow.exposed_comm_s.at(k.axis) - fast.exposed_comm_s.at(k.axis);
    EXPECT_GT(extra, 1e-3) << k.mesh << " zero " << k.zero;
    // The gradient norm's 4-byte all-reduce over 2-4 ranks: 20 us at most on the slow link.
    EXPECT_LT(slow.optimizer_s - fast.optimizer_s, 1e-4) << k.mesh << " zero " << k.zero;
  }
}

// A GPU's launch is the least any kernel instruction takes: with a launch
// far longer than every kernel of the tiny model, each instruction of one
// rank's step (no collectives, no buckets on one rank) costs exactly it;
// the feed's copy of the batch (microseconds here) is not an instruction.
TEST(CostModel, EveryKernelInstructionTakesAtLeastTheLaunch) {
  struct Launching : FakeHardware {
    double launch_seconds() const override { return 1; }
  };
  const TrainConfig c = tiny("");
  const StepPrediction plain = predict_step(c, {0}, FakeHardware(), {});
  const StepPrediction launched = predict_step(c, {0}, Launching(), {});
  const std::vector<CompiledRank> compiled = compile_ranks(c, {0});
  const size_t instructions = compiled[0].train.program->instruction_info().size();
  ASSERT_GT(instructions, 20u);
  EXPECT_LT(plain.compute_s, 1);
  EXPECT_NEAR(launched.compute_s, static_cast<double>(instructions), 1e-3);
  EXPECT_DOUBLE_EQ(launched.optimizer_s, plain.optimizer_s);
}

// Offload's copies: an instruction's activation copies (what the program
// copies around it: every offloaded value out and back) add to it at the
// host link's rate; an offloaded update adds its 12 bytes an element of
// copies (gradient and value out, value back) and runs at the host's
// memory rate instead of the device's.
TEST(CostModel, OffloadChargesItsCopiesAtTheHostLinkAndTheUpdateAtTheHostsMemory) {
  struct HostLinked : FakeHardware {
    double host_copy_seconds(double bytes, int) const override { return bytes / 1e8; }
    double host_memory_seconds(double bytes, int) const override { return bytes / 1e9; }
  };
  TrainConfig c = tiny("");
  const StepPrediction stored = predict_step(c, {0}, HostLinked(), {});
  c.offload = "activations";
  const std::vector<CompiledRank> compiled = compile_ranks(c, {0});
  const Program& program = *compiled[0].train.program;
  double copied = 0;
  for (const Program::InstructionInfo& ins : program.instruction_info())
    copied += static_cast<double>(ins.offload_bytes);
  EXPECT_GT(copied, 0);
  EXPECT_LE(copied, 2.0 * static_cast<double>(program.offload_bytes()));
  const StepPrediction activations = predict_step(c, {0}, HostLinked(), {});
  EXPECT_NEAR(activations.compute_s - stored.compute_s, copied / 1e8, 1e-9);
  EXPECT_DOUBLE_EQ(activations.optimizer_s, stored.optimizer_s);

  c.offload = "optimizer";
  double state = 0;
  for (ValueId p : compiled[0].train.global.params())
    state += static_cast<double>(compiled[0].train.global.node(p).shape.numel());
  const StepPrediction update = predict_step(c, {0}, HostLinked(), {});
  EXPECT_DOUBLE_EQ(update.compute_s, stored.compute_s);
  EXPECT_NEAR(update.optimizer_s - stored.optimizer_s,
              12 * state / 1e8 + 28 * state / 1e9 - 28 * state / 1e10, 1e-9);
}

// Offloaded weights (offload "optimizer,weights") where host memory is not
// the device's: every read of parameter storage crosses the host link, in
// order with the kernels. In f32 the einsums read the weights at every use
// (the forward and the backward's input gradient), in bf16 only their
// rounding into bf16 copies reads them. The update copies the gradient
// alone (4 bytes an element, not 12). Where host memory is the device's,
// the reads cost nothing extra.
TEST(CostModel, OffloadedWeightsChargeTheirReadsAtTheHostLink) {
  struct HostLinked : FakeHardware {
    double host_copy_seconds(double bytes, int) const override { return bytes / 1e8; }
    double host_memory_seconds(double bytes, int) const override { return bytes / 1e9; }
    bool host_buffers_on_device() const override { return false; }
  };
  struct SameMemory : HostLinked {
    bool host_buffers_on_device() const override { return true; }
  };
  std::map<std::string, double> reads;
  for (const char* precision : {"f32", "bf16"}) {
    TrainConfig c = tiny("");
    c.precision = precision;
    c.offload = "optimizer";
    const StepPrediction device = predict_step(c, {0}, HostLinked(), {});
    const StepPrediction same = predict_step(c, {0}, SameMemory(), {});
    c.offload = "optimizer,weights";
    const std::vector<CompiledRank> compiled = compile_ranks(c, {0});
    double params = 0;
    for (ValueId p : compiled[0].train.global.params())
      params += 4.0 * static_cast<double>(compiled[0].train.global.node(p).shape.numel());
    for (const Program::InstructionInfo& ins : compiled[0].train.program->instruction_info())
      reads[precision] += static_cast<double>(ins.param_read_bytes);
    const StepPrediction host = predict_step(c, {0}, HostLinked(), {});
    EXPECT_NEAR(host.compute_s - device.compute_s, reads[precision] / 1e8, 1e-9) << precision;
    EXPECT_NEAR(device.optimizer_s - host.optimizer_s, 2 * params / 1e8, 1e-9) << precision;
    EXPECT_NEAR(predict_step(c, {0}, SameMemory(), {}).compute_s, same.compute_s, 1e-12);
    if (std::string(precision) == "f32") {
      EXPECT_GT(reads[precision], params);
    }
  }
  EXPECT_GT(reads["bf16"], 0);
  EXPECT_LT(reads["bf16"], reads["f32"]);
}

TEST(CostModel, PeakMemoryIsTheDryRunsWorstRank) {
  const FakeHardware hw;
  for (const char* mesh : {"data=2,model=2", "pipe=2,data=2"}) {
    TrainConfig c = tiny(mesh);
    c.zero = std::string(mesh).find("pipe") != std::string::npos ? 1 : 3;
    c.microbatches = 2;
    if (c.zero == 3) c.microbatches = 1;
    const StepPrediction p = predict_step(c, representative_ranks(Mesh::parse(mesh), true), hw, {});
    EXPECT_EQ(p.peak_bytes, worst_predicted(c)) << mesh;
  }
}

TEST(CostModel, DataParallelGradientsHideBehindBackwardWhenTheLinkIsFast) {
  const TrainConfig c = tiny("data=2");
  const StepPrediction fast = predict_step(c, {0}, FakeHardware(8, /*link_gbs=*/1000), {});
  const StepPrediction slow = predict_step(c, {0}, FakeHardware(8, 0.001), {});
  ASSERT_GT(fast.comm_s.at("data"), 0);
  EXPECT_LT(fast.exposed_comm_s.at("data"), fast.comm_s.at("data"));
  EXPECT_GT(slow.exposed_comm_s.at("data"), 0.5 * slow.comm_s.at("data"));
  EXPECT_GT(slow.step_s, fast.step_s);
}

TEST(CostModel, PipelinesHaveABubbleThatShrinksWithMoreMicrobatches) {
  const FakeHardware hw;
  TrainConfig c = tiny("pipe=2");
  c.schedule = "gpipe";
  c.microbatches = 2;
  const std::vector<int> ranks = representative_ranks(Mesh::parse(c.mesh), false);
  ASSERT_EQ(ranks, (std::vector<int>{0, 1}));
  const StepPrediction two = predict_step(c, ranks, hw, {});
  c.microbatches = 8;
  const StepPrediction eight = predict_step(c, ranks, hw, {});
  EXPECT_GT(two.bubble_s, 0);
  EXPECT_LT(eight.bubble_s / eight.step_s, two.bubble_s / two.step_s);
}

// gpipe and 1f1b compile to the same stage programs (zb-h1 splits its
// backward into two phases, so it compiles its own).
TEST(CostModel, OneCompiledPipelineStandsForGpipeAnd1f1b) {
  const FakeHardware hw;
  TrainConfig c = tiny("pipe=2,data=2");
  c.microbatches = 4;
  c.zero = 1;
  const std::vector<int> ranks = representative_ranks(Mesh::parse(c.mesh), true);
  const std::vector<CompiledRank> as_1f1b = compile_ranks(c, ranks);
  for (const char* name : {"gpipe"}) {
    c.schedule = name;
    const Schedule s = make_schedule(name, 2, 4);
    const StepPrediction shared = predict_compiled(as_1f1b, hw, {}, &s);
    const StepPrediction own = predict_step(c, ranks, hw, {});
    EXPECT_DOUBLE_EQ(shared.step_s, own.step_s) << name;
    EXPECT_DOUBLE_EQ(shared.bubble_s, own.bubble_s) << name;
    EXPECT_EQ(shared.peak_bytes, own.peak_bytes) << name;
    EXPECT_EQ(own.peak_bytes, worst_predicted(c)) << name;
  }
}

// Links that cost their bytes alone (no latency), so a collective's time is
// proportional to the bytes it carries.
class BandwidthOnlyHardware : public FakeHardware {
 public:
  double collective_seconds(CollectiveKind, double bytes, int ranks, Link) const override {
    return bytes / 1e9 * (ranks - 1) / ranks;
  }
};

// Each collective is charged at the bytes it carries: 2 per element where
// the lowering carries bf16. Tensor parallelism's model-axis collectives on
// the tiny GPT are all partial sums, so tp_comm_precision bf16 halves them
// exactly; a bf16 gradient bucket is charged as the runtime reduces it (an
// all-to-all of its bf16 values, an all-gather of the summed bf16 chunks, and
// the rounding, summing and widening passes); sequence parallelism's bf16
// gathers (values only GEMMs read) and partial sums leave some f32 (tokens, LayerNorm gradients).
TEST(CostModel, ChargesEachCollectiveAtTheBytesItCarries) {
  const BandwidthOnlyHardware hw;
  auto comm = [&](const TrainConfig& c, const char* axis) {
    return predict_step(c, {0}, hw, {}).comm_s.at(axis);
  };
  TrainConfig tp = tiny("model=2");
  const double f32_tp = comm(tp, "model");
  tp.precision = "bf16";
  EXPECT_DOUBLE_EQ(comm(tp, "model"), f32_tp);  // bf16 GEMMs alone carry nothing in bf16 here
  tp.tp_comm_precision = "bf16";
  EXPECT_NEAR(comm(tp, "model"), f32_tp / 2, 1e-12 * f32_tp);

  // data=2: each bf16 bucket of n f32 elements replaces the f32 all-reduce of
  // 4n bytes by an all-to-all of 2n bytes, an all-gather of one rank's 2n/2
  // byte chunk and 6n + 3n + 6n bytes of memory passes (the data axis also
  // carries f32 gathers, and the loss's f32 bucket).
  TrainConfig dp = tiny("data=2");
  dp.precision = "bf16";
  const double f32_grads = comm(dp, "data");
  dp.grad_reduce_precision = "bf16";
  double delta = 0;
  int bf16_buckets = 0;
  for (const Program::BucketInfo& b : compile_ranks(dp, {0})[0].train.program->bucket_info()) {
    if (!b.bf16) continue;
    ++bf16_buckets;
    const double n = static_cast<double>(b.bytes) / 4, chunk = 2 * std::ceil(n / 2);
    delta += hw.collective_seconds(CollectiveKind::kAllToAll, 2 * n, 2, Link::kIntraNode) +
             hw.collective_seconds(CollectiveKind::kAllGather, chunk, 2, Link::kIntraNode) +
             hw.memory_seconds(6 * n + 2 * n + chunk + 6 * n, 1) -
             hw.collective_seconds(CollectiveKind::kAllReduce, 4 * n, 2, Link::kIntraNode);
  }
  ASSERT_GT(bf16_buckets, 0);
  EXPECT_NEAR(comm(dp, "data"), f32_grads + delta, 1e-12 * f32_grads);

  TrainConfig sp = tiny("model=2");
  sp.layout = "heads=model,hidden=model,vocab=model,seq=model";
  const double f32_sp = comm(sp, "model");
  sp.precision = "bf16";
  const double bf16_gathers = comm(sp, "model");
  sp.tp_comm_precision = "bf16";
  const double bf16_sp = comm(sp, "model");
  EXPECT_LT(bf16_gathers, f32_sp);
  EXPECT_LT(bf16_sp, bf16_gathers);
  EXPECT_GT(bf16_sp, f32_sp / 2);
}

// Only the attention kernels take time (their FLOPs at 10 GFLOP/s): the
// predicted compute is the attention's on the slowest rank.
class AttentionOnlyHardware : public FakeHardware {
 public:
  double gemm_seconds(int64_t, int64_t, int64_t, int64_t, Precision, int) const override {
    return 0;
  }
  double memory_seconds(double, int) const override { return 0; }
  double kernel_seconds(const std::string& op, double, double flops, Precision,
                        int) const override {
    return op == "attention" || op == "attention_grad" ? flops / 1e10 : 0;
  }
  double collective_seconds(CollectiveKind, double, int, Link) const override { return 0; }
  double p2p_seconds(double, Link) const override { return 0; }
};

// Ring attention on ctx=2 splits each causal attention into 2 x 2 chunk
// pairs of a quarter of its (unmasked) FLOPs each; balanced, every rank
// computes half a pair per step over 2 steps: a quarter of the unmasked
// FLOPs, half the causal work the one-process attention is charged
// (kernel_work.h: causal halved). Both count the work the kernels do (the
// backward's five block products per pair in both), so the two ranks split
// it evenly.
TEST(CostModel, BalancedRingAttentionCostsEachRankHalfTheCausalAttentionOnCtx2) {
  const AttentionOnlyHardware hw;
  TrainConfig one = tiny("");
  TrainConfig ring = tiny("ctx=2");
  ring.layout = "seq=ctx";
  ring.context_parallel = "ring";
  const double whole = predict_step(one, {0}, hw, {}).compute_s;
  ASSERT_GT(whole, 0);
  EXPECT_NEAR(predict_step(ring, {0, 1}, hw, {}).compute_s, whole / 2, 1e-12 * whole);
}

// The cost model charges a whole causal attention (and its gradient) half
// its unmasked node FLOPs, the work its kernel does; any other node its
// node FLOPs.
TEST(CostModel, CausalAttentionIsChargedHalfItsNodeFlops) {
  const TrainConfig c = tiny("");
  const TrainingGraph t = build_training_graph(c, c.batch);
  int attention = 0;
  for (ValueId v = 0; v < t.graph.size(); ++v) {
    const Node& n = t.graph.node(v);
    const bool fused = n.kind == OpKind::kAttention || n.kind == OpKind::kAttentionGrad;
    attention += fused;
    EXPECT_DOUBLE_EQ(kernel_work_flops(t.graph, v), (fused ? 0.5 : 1.0) * t.graph.node_flops(v))
        << n.name;
  }
  EXPECT_GT(attention, 0);
}

// Dropout draws one Philox number per element; a fused causal attention
// with dropout on its probabilities one per visible probability, forward
// and backward alike. A hardware that prices draws adds exactly their time.
TEST(CostModel, DropoutDrawsArePricedPerElementAndVisibleProbability) {
  TrainConfig c = tiny("");
  c.dropout = 0.1;
  c.attention_dropout = 0.1;
  const TrainingGraph t = build_training_graph(c, c.batch);
  const double probabilities = 0.5 * c.batch * c.n_head * c.context * c.context;
  double draws = 0;
  int attention = 0, dropout = 0;
  for (ValueId v = 0; v < t.graph.size(); ++v) {
    const Node& n = t.graph.node(v);
    const double d = kernel_work_draws(t.graph, v);
    draws += d;
    if (n.kind == OpKind::kAttention || n.kind == OpKind::kAttentionGrad) {
      ++attention;
      EXPECT_DOUBLE_EQ(d, probabilities) << n.name;
    } else {
      dropout += n.kind == OpKind::kDropout;
      EXPECT_EQ(d, n.kind == OpKind::kDropout ? n.shape.numel() : 0) << n.name;
    }
  }
  EXPECT_EQ(attention, 2 * c.n_layer);
  EXPECT_GT(dropout, 0);
  struct Drawing : FakeHardware {
    double draw_seconds(double d, int) const override { return d * 1e-9; }
  };
  const double extra = predict_step(c, {0}, Drawing(), {}).compute_s -
                       predict_step(c, {0}, FakeHardware(), {}).compute_s;
  EXPECT_NEAR(extra, draws * 1e-9, 1e-6 * extra);
}

// The runtime reduces a bf16 gradient bucket blocking, at its last member
// (Communicator::all_reduce_bf16), not in the background behind the rest of
// the backward as it does an f32 bucket: its whole time is exposed and on the
// critical path. On slow links the f32 buckets hide part of their time; the
// bf16 ones hide nothing (the data axis's only other communication is the
// loss's 4-byte f32 bucket).
TEST(CostModel, Bf16GradientBucketsAreReducedBlocking) {
  const FakeHardware hw(8, 0.05);
  TrainConfig dp = tiny("data=2");
  dp.precision = "bf16";
  dp.bucket_mib = 1e-3;  // about a bucket per gradient: most of them could overlap
  const StepPrediction f32 = predict_step(dp, {0}, hw, {});
  EXPECT_LT(f32.exposed_comm_s.at("data"), 0.9 * f32.comm_s.at("data"));
  dp.grad_reduce_precision = "bf16";
  const StepPrediction bf16 = predict_step(dp, {0}, hw, {});
  const double loss_bucket =
      hw.collective_seconds(CollectiveKind::kAllReduce, 4, 2, Link::kIntraNode);
  EXPECT_GE(bf16.exposed_comm_s.at("data"), bf16.comm_s.at("data") - loss_bucket - 1e-15);
  EXPECT_NEAR(bf16.step_s,
              bf16.compute_s + sum(bf16.exposed_comm_s) + bf16.bubble_s + bf16.optimizer_s,
              1e-12 * bf16.step_s);
}

TEST(CostModel, AxisOrderDecidesWhichAxisStaysOnANode) {
  const Mesh m = Mesh::parse("data=4,model=2");
  EXPECT_EQ(link_of_axis(m, 1, 2), Link::kIntraNode);  // model: consecutive ranks
  EXPECT_EQ(link_of_axis(m, 0, 2), Link::kInterNode);  // data: stride 2, span 8
  EXPECT_EQ(link_of_axis(m, 0, 8), Link::kIntraNode);
}

TEST(PlanSearch, FixedKnobsGiveExactlyThatPlan) {
  const FakeHardware hw;
  PlanRequest q;
  q.base = tiny_gpt_config(2, 8);
  q.ranks = 4;
  q.mesh = "data=2,model=2";
  q.layout = "";
  q.schedule = "1f1b";
  q.microbatches = 1;
  q.zero = 1;
  q.recompute = "selective";
  // The user's --set overrides ride along, but not those of knobs the plan chooses.
  q.overrides = {"lr=0.001", "zero=2", "data_dir=/my data", "threads=4"};
  const PlanResult r = search_plans(q, hw);
  ASSERT_EQ(r.plans.size(), 1u);
  TrainConfig c = q.base;
  c.mesh = "data=2,model=2";
  c.zero = 1;
  c.recompute = "selective";
  const StepPrediction p = predict_step(c, representative_ranks(Mesh::parse(c.mesh), true), hw, {});
  EXPECT_DOUBLE_EQ(r.plans[0].prediction.step_s, p.step_s);
  EXPECT_EQ(r.plans[0].prediction.peak_bytes, worst_predicted(c));
  EXPECT_NE(r.plans[0].command.find("--mesh data=2,model=2"), std::string::npos);
  EXPECT_NE(r.plans[0].command.find("--zero 1 --recompute selective"), std::string::npos);
  EXPECT_NE(r.plans[0].command.find(" --set lr=0.001 --set 'data_dir=/my data' --mesh"),
            std::string::npos)
      << r.plans[0].command;
  EXPECT_EQ(r.plans[0].command.find("zero=2"), std::string::npos) << r.plans[0].command;
  EXPECT_EQ(r.plans[0].command.find("threads=4"), std::string::npos) << r.plans[0].command;
}

TEST(PlanSearch, RanksEveryFeasibleCandidateFastestFirst) {
  const FakeHardware hw;
  PlanRequest q;
  q.base = tiny_gpt_config(2, 8);
  q.ranks = 4;
  q.exhaustive = true;  // every candidate costed exactly (the two phases: two_phase_search_test.cc)
  const PlanResult r = search_plans(q, hw);
  EXPECT_GT(r.considered, 50);
  EXPECT_GT(r.pruned, 0);  // e.g. model=4 does not divide 2 heads
  EXPECT_EQ(r.considered - r.pruned, static_cast<int>(r.plans.size()));
  expect_plan_order(r);  // fastest first; steps equal as printed: the smaller peak first
  for (const Plan& p : r.plans) {
    EXPECT_EQ(Mesh::parse(p.config.mesh).rank_count(), 4);
    EXPECT_EQ(p.config.mesh.find("model=4"), std::string::npos);
  }
}

// The search shares compiles (stage graphs across ranks and meshes, one
// pipeline compile for ZeRO 0-2, evaluation arenas across micro-batches,
// schedules and recompute policies); every prediction must be exactly what
// compiling each candidate on its own predicts (4 ranks, pipelines of 2 and 4).
TEST(PlanSearch, SharedCompilesPredictExactlyWhatSeparateCompilesPredict) {
  const FakeHardware hw(/*per_node=*/2);  // several nodes: every axis order is searched
  PlanRequest q;
  q.base = tiny_gpt_config(4, 8);
  q.ranks = 4;
  q.exhaustive = true;
  q.share_compiles = true;
  const PlanResult fast = search_plans(q, hw);
  q.share_compiles = false;
  const PlanResult slow = search_plans(q, hw);
  EXPECT_EQ(fast.considered, slow.considered);
  EXPECT_EQ(fast.pruned, slow.pruned);
  ASSERT_EQ(fast.plans.size(), slow.plans.size());
  int pipelined_with_zero = 0;
  for (size_t i = 0; i < fast.plans.size(); ++i) {
    const Plan &a = fast.plans[i], &b = slow.plans[i];
    ASSERT_EQ(a.config.to_json().dump(), b.config.to_json().dump()) << i;
    EXPECT_EQ(a.prediction.step_s, b.prediction.step_s) << a.command;
    EXPECT_EQ(a.prediction.peak_bytes, b.prediction.peak_bytes) << a.command;
    EXPECT_EQ(a.prediction.peak_rank, b.prediction.peak_rank) << a.command;
    EXPECT_EQ(a.prediction.compute_s, b.prediction.compute_s) << a.command;
    EXPECT_EQ(a.prediction.bubble_s, b.prediction.bubble_s) << a.command;
    EXPECT_EQ(a.prediction.optimizer_s, b.prediction.optimizer_s) << a.command;
    EXPECT_EQ(a.prediction.comm_s, b.prediction.comm_s) << a.command;
    EXPECT_EQ(a.prediction.exposed_comm_s, b.prediction.exposed_comm_s) << a.command;
    if (a.config.mesh.find("pipe=") != std::string::npos && a.config.zero > 0)
      ++pipelined_with_zero;
  }
  EXPECT_GT(fast.plans.size(), 50u);
  EXPECT_GT(pipelined_with_zero, 10);  // the shared ZeRO compiles were exercised
}

// Micro-batch counts are every divisor of the rows a data rank holds, not
// only powers of two: 48 rows per data rank reach micro-batch size 1.
TEST(PlanSearch, MicroBatchCountsAreEveryDivisorOfADataRanksRows) {
  const FakeHardware hw;
  PlanRequest q;
  q.base = tiny_gpt_config(2, 96);
  q.ranks = 4;
  q.mesh = "pipe=2,data=2";  // 48 rows a data rank
  q.layout = "";
  q.schedule = "1f1b";
  q.zero = 0;
  q.recompute = "none";
  q.exhaustive = true;
  q.check_device_memory = false;
  const PlanResult r = search_plans(q, hw);
  std::set<int64_t> counts;
  for (const Plan& p : r.plans) counts.insert(p.config.microbatches);
  EXPECT_EQ(counts, (std::set<int64_t>{1, 2, 3, 4, 6, 8, 12, 16, 24, 48}));
  EXPECT_EQ(r.considered, 10);
}

TEST(PlanSearch, NothingFitsNamesTheSmallestPeak) {
  const FakeHardware hw;
  PlanRequest q;
  q.base = tiny_gpt_config(2, 8);
  q.ranks = 2;
  q.memory_limit = 1024;
  const std::string e = error_of([&] { search_plans(q, hw); });
  EXPECT_NE(e.find("fits 0.00 MiB per rank (--memory-limit)"), std::string::npos) << e;
  EXPECT_NE(e.find("the smallest peak is "), std::string::npos) << e;
  EXPECT_NE(e.find("--mesh "), std::string::npos) << e;  // the smallest plan's knobs
  EXPECT_NE(e.find("more pipeline stages or tensor parallelism"), std::string::npos) << e;
  EXPECT_NE(e.find("raise --memory-limit"), std::string::npos) << e;
}

TEST(PlanSearch, APrimeRankCountLargerThanEveryDimIsRefusedWithWhatWasTried) {
  const FakeHardware hw;
  PlanRequest q;
  q.base = tiny_gpt_config(2, 8);
  q.ranks = 13;
  const std::string e = error_of([&] { search_plans(q, hw); });
  EXPECT_NE(e.find("configurations of 13 ranks suits this model"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessel::plan
