// The cost model's view of how the hardware runs a program, on fake
// hardware whose times are simple formulas: polled against background
// progress of gradient buckets and pipeline sends (CommProgress), ranks
// sharing cores when they outnumber them (compute_share), and einsums costed
// as a device GEMM for clusters, whatever this CPU's kernels staged
// (EinsumCosting); plus the profile's "progress" entry.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "synthetic_profile.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/plan/model/device_einsum.h"
#include "tessel/plan/profile/cluster_spec.h"
#include "tessel/plan/profile/machine_profile.h"

namespace tessel::plan {
namespace {

// 10 GFLOP/s, 10 GB/s, links 10 us + 1 GB/s (x link_scale), one node;
// `cores` cores (ranks beyond them share), progress as given.
class FakeCpu : public HardwareModel {
 public:
  FakeCpu(CommProgress progress = {}, int cores = 64, double link_scale = 1)
      : progress_(progress), cores_(cores), link_scale_(link_scale) {}
  std::string name() const override { return "fake cpu"; }
  double gemm_seconds(int64_t b, int64_t m, int64_t n, int64_t k, Precision, int) const override {
    return 2.0 * b * m * n * k / 1e10;
  }
  double memory_seconds(double bytes, int) const override { return bytes / 1e10; }
  double collective_seconds(CollectiveKind, double bytes, int ranks, Link) const override {
    return link_scale_ * (1e-5 + bytes / 1e9) * (ranks - 1) / ranks;
  }
  double p2p_seconds(double bytes, Link) const override {
    return link_scale_ * (1e-5 + bytes / 1e9);
  }
  int devices_per_node() const override { return 64; }
  int total_devices() const override { return 64; }
  int64_t device_memory_bytes() const override { return 0; }
  double peak_flops(Precision, int) const override { return 1e10; }
  CommProgress progress() const override { return progress_; }
  double compute_share(int ranks, int threads) const override {
    return std::max(1.0, double(ranks) * threads / cores_);
  }
  EinsumCosting einsum_costing() const override { return EinsumCosting::kCompiled; }

 private:
  CommProgress progress_;
  int cores_;
  double link_scale_;
};

CommProgress polled(double overlap, double poll_bytes, double factor = 1) {
  CommProgress p;
  p.mode = CommProgress::Mode::kPolled;
  p.all_reduce_overlap = overlap;
  p.all_reduce_poll_bytes = poll_bytes;
  p.nonblocking_factor = factor;
  p.send_overlap = overlap;
  p.send_poll_bytes = poll_bytes;
  return p;
}

// Small buckets (10 KiB), so that a data-parallel backward has many.
TrainConfig tiny_with_small_buckets(const std::string& mesh) {
  TrainConfig c = tiny_gpt_config(2, 8);
  c.mesh = mesh;
  c.bucket_mib = 0.01;
  return c;
}

StepPrediction predict(const TrainConfig& c, const HardwareModel& hw) {
  return predict_step(c, representative_ranks(Mesh::parse(c.mesh), false), hw, {});
}

double total_seconds(const std::map<std::string, double>& m) {
  double t = 0;
  for (const auto& [k, v] : m) t += v;
  return t;
}

double at(const std::map<std::string, double>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0.0 : it->second;
}

TEST(PolledProgress, DataParallelBucketsHiddenInTheBackgroundAreChargedWhenPolled) {
  const TrainConfig c = tiny_with_small_buckets("data=2");
  const StepPrediction background = predict(c, FakeCpu());
  // Nothing hidden: each bucket's all-reduce is charged in full on the poll after it starts.
  const StepPrediction none = predict(c, FakeCpu(polled(0, 1e18)));
  ASSERT_GT(background.comm_s.at("data"), 0);
  EXPECT_LT(background.exposed_comm_s.at("data"), 0.5 * background.comm_s.at("data"));
  EXPECT_DOUBLE_EQ(none.comm_s.at("data"), background.comm_s.at("data"));
  EXPECT_NEAR(none.exposed_comm_s.at("data"), none.comm_s.at("data"), 1e-12);
  // The step grows by exactly what the background hid.
  EXPECT_NEAR(none.step_s - background.step_s,
              background.comm_s.at("data") - background.exposed_comm_s.at("data"), 1e-12);
  EXPECT_NEAR(none.compute_s, background.compute_s, 1e-12);
}

TEST(PolledProgress, OverlapAndPollsDecideWhatIsHidden) {
  const TrainConfig c = tiny_with_small_buckets("data=2");
  const double comm = predict(c, FakeCpu()).comm_s.at("data");
  // Everything overlaps and one poll suffices: as hidden as in the background, or nearly.
  const StepPrediction free = predict(c, FakeCpu(polled(1, 1e18)));
  // Everything would overlap, but a poll moves one byte: the tests never
  // finish a bucket, the final wait does nearly all of it.
  const StepPrediction starved = predict(c, FakeCpu(polled(1, 1)));
  // Half overlaps.
  const StepPrediction half = predict(c, FakeCpu(polled(0.5, 1e18)));
  EXPECT_LT(free.exposed_comm_s.at("data"), 0.5 * comm);
  EXPECT_GT(starved.exposed_comm_s.at("data"), 0.99 * comm);
  EXPECT_GT(half.exposed_comm_s.at("data"), 0.5 * comm - 1e-12);
  EXPECT_LT(half.exposed_comm_s.at("data"), comm);
  EXPECT_LT(free.step_s, half.step_s);
  EXPECT_LT(half.step_s, starved.step_s + 1e-12);
}

TEST(PolledProgress, TheNonBlockingFactorScalesTheBucketsTime) {
  const TrainConfig c = tiny_with_small_buckets("data=2");
  const StepPrediction one = predict(c, FakeCpu(polled(0, 1e18, 1)));
  const StepPrediction two = predict(c, FakeCpu(polled(0, 1e18, 2)));
  const StepPrediction three = predict(c, FakeCpu(polled(0, 1e18, 3)));
  // The buckets' time (comm also holds the blocking loss all-reduce) grows
  // by the same amount per unit of factor, and nothing of it is hidden.
  const double per_unit = two.comm_s.at("data") - one.comm_s.at("data");
  EXPECT_GT(per_unit, 0);
  EXPECT_NEAR(three.comm_s.at("data") - two.comm_s.at("data"), per_unit, 1e-12);
  EXPECT_NEAR(two.step_s - one.step_s, per_unit, 1e-12);
}

// With ZeRO and pipelines too: their gathers and post-schedule reductions
// are exposed communication only.
TEST(PolledProgress, StepIsStillComputePlusExposedPlusBubblePlusOptimizer) {
  for (const CommProgress& p : {CommProgress{}, polled(0, 1e18), polled(0.3, 4096, 1.5)})
    for (const char* mesh :
         {"data=2", "data=2,model=2", "model=2", "data=2 zero", "pipe=2,data=2"}) {
      const std::string m(mesh);
      TrainConfig c = tiny_with_small_buckets(m.substr(0, m.find(' ')));
      if (m.find("zero") != std::string::npos) c.zero = 1;
      if (m.find("pipe") != std::string::npos) c.microbatches = 2;
      const StepPrediction s = predict(c, FakeCpu(p, 64, 100));
      EXPECT_NEAR(s.step_s,
                  s.compute_s + total_seconds(s.exposed_comm_s) + s.bubble_s + s.optimizer_s, 1e-12)
          << mesh;
      for (const auto& [axis, t] : s.exposed_comm_s) EXPECT_LE(t, s.comm_s.at(axis) + 1e-12);
    }
}

TEST(PolledProgress, PipelineSendsCostTheSenderAndWaitForItsPolls) {
  TrainConfig c = tiny_with_small_buckets("pipe=2");
  c.schedule = "1f1b";
  c.microbatches = 4;
  // Slow links so that the sends matter.
  const StepPrediction background = predict(c, FakeCpu({}, 64, 100));
  const StepPrediction cheap = predict(c, FakeCpu(polled(1, 1e18), 64, 100));
  const StepPrediction charged = predict(c, FakeCpu(polled(0, 1e18), 64, 100));
  const StepPrediction starved = predict(c, FakeCpu(polled(1, 1), 64, 100));
  // (Exposed "pipe" time in the background is the tied embedding's sum only.)
  EXPECT_DOUBLE_EQ(at(cheap.exposed_comm_s, "pipe"), at(background.exposed_comm_s, "pipe"));
  EXPECT_GT(at(charged.exposed_comm_s, "pipe"), at(background.exposed_comm_s, "pipe"));
  EXPECT_GT(charged.step_s, background.step_s);
  // A transfer waits for the sender's polls: with 1 byte a poll, it takes
  // far longer than the wire.
  EXPECT_GT(starved.step_s, background.step_s);
  EXPECT_GE(cheap.step_s, background.step_s - 1e-12);
}

TEST(SharedCores, OversubscribedRanksComputeAtTheirShareOfACore) {
  const TrainConfig c = tiny_with_small_buckets("data=4");
  const StepPrediction own = predict(c, FakeCpu({}, /*cores=*/4));
  const StepPrediction shared = predict(c, FakeCpu({}, /*cores=*/2));
  EXPECT_NEAR(shared.compute_s, 2 * own.compute_s, 1e-12 * own.compute_s);
  EXPECT_GT(shared.step_s, 1.5 * own.step_s);
  // Threads count as well: 2 ranks of 2 threads on 2 cores.
  const TrainConfig d = tiny_with_small_buckets("data=2");
  CostOptions two;
  two.threads = 2;
  const StepPrediction a = predict_step(d, {0}, FakeCpu({}, 4), two);
  const StepPrediction b = predict_step(d, {0}, FakeCpu({}, 2), two);
  EXPECT_NEAR(b.compute_s, 2 * a.compute_s, 1e-12 * a.compute_s);
}

TEST(SharedCores, PipelineRanksFillEachOthersBubbles) {
  TrainConfig c = tiny_with_small_buckets("pipe=2");
  c.schedule = "gpipe";
  // One micro-batch: each rank idles while the other works, so two ranks
  // on one core lose nothing in the schedule (the update after it, run by
  // both at once, takes twice as long).
  c.microbatches = 1;
  StepPrediction own = predict(c, FakeCpu({}, 2));
  StepPrediction shared = predict(c, FakeCpu({}, 1));
  EXPECT_NEAR(shared.step_s - shared.optimizer_s, own.step_s - own.optimizer_s, 1e-12);
  EXPECT_GT(shared.optimizer_s, own.optimizer_s);
  // Eight: little bubble, the core is the bottleneck: almost twice the schedule.
  c.microbatches = 8;
  own = predict(c, FakeCpu({}, 2));
  shared = predict(c, FakeCpu({}, 1));
  const double own_schedule = own.step_s - own.optimizer_s;
  const double shared_schedule = shared.step_s - shared.optimizer_s;
  EXPECT_GT(shared_schedule, 1.5 * own_schedule);
  EXPECT_LT(shared_schedule, 2 * own_schedule);
}

TEST(SharedCores, AProfileSharesItsCoresAndAClusterDoesNot) {
  const MachineProfile profile(synthetic_profile_data(), "p.json");  // 2 cores
  EXPECT_DOUBLE_EQ(profile.compute_share(2, 1), 1);
  EXPECT_DOUBLE_EQ(profile.compute_share(4, 1), 2);
  EXPECT_DOUBLE_EQ(profile.compute_share(2, 2), 2);
  EXPECT_DOUBLE_EQ(profile.compute_share(1, 2), 1);
}

TEST(DeviceEinsum, OperandsThatAStridedBatchedGemmTakesNeedNoCopy) {
  const Shape a{{"b", 4}, {"m", 8}, {"k", 16}}, b{{"b", 4}, {"k", 16}, {"n", 32}},
      out{{"b", 4}, {"m", 8}, {"n", 32}};
  EXPECT_EQ(device_einsum_copy_bytes(a, b, out, Precision::kF32), 0);
  // Attention's (batch, seq, heads, head) layout: batch dims b, h apart
  // (a pointer per matrix), rows s strided, columns d contiguous: in place.
  const Shape q{{"b", 2}, {"s", 8}, {"h", 4}, {"d", 16}},
      k{{"b", 2}, {"t", 8}, {"h", 4}, {"d", 16}}, scores{{"b", 2}, {"h", 4}, {"s", 8}, {"t", 8}};
  EXPECT_EQ(device_einsum_copy_bytes(q, k, scores, Precision::kF32), 0);
  // A contracted group split around a row dim cannot be one index: a is copied.
  const Shape split{{"k1", 4}, {"m", 8}, {"k2", 4}}, w{{"k1", 4}, {"k2", 4}, {"n", 32}},
      res{{"m", 8}, {"n", 32}};
  EXPECT_EQ(device_einsum_copy_bytes(split, w, res, Precision::kF32), 2.0 * 4 * split.numel());
  EXPECT_EQ(device_einsum_copy_bytes(split, w, res, Precision::kBF16), 2.0 * 2 * split.numel());
}

TEST(DeviceEinsum, AClusterPredictionNeverReadsTheCompiledKernelsScratch) {
  // The scratch of a bf16 einsum is what this CPU's oneDNN would stage (or,
  // without a bf16 matmul, an estimate): whatever it is, a cluster costs the
  // einsum the same; this machine's profile charges it.
  const ClusterSpec cluster = ClusterSpec::from_json(nlohmann::json::parse(R"({
        "name": "c", "nodes": 1, "devices_per_node": 8,
        "device": {"name": "gpu", "peak_tflops": {"bf16": 300, "f32": 20},
                   "memory_bandwidth_gbs": 2000, "memory_gib": 80},
        "links": {"intra_node": {"bandwidth_gbs": 250, "latency_us": 2},
                  "inter_node": {"bandwidth_gbs": 25, "latency_us": 5}}})"),
                                                     "c.json");
  const FakeCpu cpu;
  TrainConfig c = tiny_with_small_buckets("");
  c.precision = "bf16";
  const std::vector<CompiledRank> ranks = compile_ranks(c, {0});
  const Program& p = *ranks.front().train.program;
  CostOptions bf16;
  bf16.precision = Precision::kBF16;
  int einsums = 0;
  for (Program::InstructionInfo ins : p.instruction_info()) {
    if (!ins.einsum) continue;
    ++einsums;
    ins.scratch_bytes = 0;
    const double none = einsum_seconds(cluster, p.graph(), ins, bf16);
    const double cpu_none = einsum_seconds(cpu, p.graph(), ins, bf16);
    ins.scratch_bytes = size_t{1} << 30;
    EXPECT_EQ(einsum_seconds(cluster, p.graph(), ins, bf16), none);
    EXPECT_GT(einsum_seconds(cpu, p.graph(), ins, bf16), cpu_none);
  }
  EXPECT_GT(einsums, 4);
  EXPECT_EQ(cluster.einsum_costing(), EinsumCosting::kStridedDevice);
  EXPECT_EQ(MachineProfile(synthetic_profile_data(), "p.json").einsum_costing(),
            EinsumCosting::kCompiled);
}

TEST(ProfileProgress, RoundTripsAndDefaultsToPolledWithNothingHidden) {
  MachineProfileData d = synthetic_profile_data();
  const MachineProfile old(d, "old.json");
  EXPECT_EQ(old.progress().mode, CommProgress::Mode::kPolled);
  EXPECT_EQ(old.progress().all_reduce_overlap, 0);
  EXPECT_EQ(old.progress().send_overlap, 0);
  EXPECT_FALSE(old.to_json().contains("progress"));
  d.has_progress = true;
  d.progress = polled(0.25, 65536, 1.8);
  const MachineProfile measured(d, "new.json");
  const MachineProfile back = MachineProfile::from_json(measured.to_json(), "new.json");
  EXPECT_EQ(back.progress().mode, CommProgress::Mode::kPolled);
  EXPECT_DOUBLE_EQ(back.progress().all_reduce_overlap, 0.25);
  EXPECT_DOUBLE_EQ(back.progress().all_reduce_poll_bytes, 65536);
  EXPECT_DOUBLE_EQ(back.progress().nonblocking_factor, 1.8);
  // Clusters progress in the background.
  EXPECT_EQ(FakeCpu().progress().mode, CommProgress::Mode::kBackground);
}

TEST(ProfileProgress, ErrorsNameTheKey) {
  MachineProfileData d = synthetic_profile_data();
  d.has_progress = true;
  d.progress = polled(0.5, 4096);
  nlohmann::json j = MachineProfile(d, "p.json").to_json();
  j["progress"]["all_reduce_overlap"] = 1.5;
  EXPECT_NE(error_of([&] {
              MachineProfile::from_json(j, "p.json");
            }).find("p.json: key 'progress.all_reduce_overlap' must be a fraction"),
            std::string::npos)
      << error_of([&] { MachineProfile::from_json(j, "p.json"); });
  j["progress"]["all_reduce_overlap"] = 0.5;
  j["progress"]["mode"] = "sometimes";
  EXPECT_NE(error_of([&] { MachineProfile::from_json(j, "p.json"); }).find("'progress.mode'"),
            std::string::npos);
  j["progress"]["mode"] = "polled";
  j["progress"]["extra"] = 1;
  EXPECT_NE(error_of([&] { MachineProfile::from_json(j, "p.json"); }).find("extra"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::plan
