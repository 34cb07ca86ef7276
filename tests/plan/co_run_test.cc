// Ranks that slow each other down on one node (HardwareModel::co_run): the
// profile's "co_run" entry (round trip, missing = factor 1, malformed = an
// error naming the key) and the cost model applying it by mechanism: a
// single program's compute at the computing factor, a lone rank and a
// cluster unchanged, a pipeline between the polling and the computing
// factor by how much its ranks' actions overlap.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "synthetic_profile.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/plan/profile/cluster_spec.h"
#include "tessel/plan/profile/machine_profile.h"
#include "toy_hardware.h"

namespace tessel::plan {
namespace {

// 10 GFLOP/s, 10 GB/s, links 10 us + 1 GB/s, one node of `cores` cores,
// background progress, the given co-run factors.
class CoRunCpu : public ToyHardware {
 public:
  explicit CoRunCpu(CoRun co_run, int cores = 64) : ToyHardware(cores), co_run_(co_run) {}
  std::string name() const override { return "co-run cpu"; }
  double compute_share(int ranks, int threads) const override {
    return std::max(1.0, double(ranks) * threads / devices_);
  }
  CoRun co_run() const override { return co_run_; }
  EinsumCosting einsum_costing() const override { return EinsumCosting::kCompiled; }

 private:
  CoRun co_run_;
};

CoRun co_run_of(double computing, double polling) {
  CoRun c;
  c.computing = computing;
  c.polling = polling;
  return c;
}

StepPrediction co_run_predict(const TrainConfig& c, const HardwareModel& hw) {
  return predict_step(c, representative_ranks(Mesh::parse(c.mesh), false), hw, {});
}

TrainConfig co_run_config(const std::string& mesh, int microbatches = 1) {
  TrainConfig c = tiny_gpt_config(2, 8);
  c.mesh = mesh;
  c.microbatches = microbatches;
  c.schedule = "gpipe";
  return c;
}

TEST(MachineProfileCoRun, RoundTripsAndOldProfilesLoadWithFactorOne) {
  MachineProfileData d = synthetic_profile_data();
  const MachineProfile old(d, "old.json");
  EXPECT_FALSE(old.has_co_run());
  EXPECT_DOUBLE_EQ(old.co_run().computing, 1);
  EXPECT_DOUBLE_EQ(old.co_run().polling, 1);
  EXPECT_FALSE(old.to_json().contains("co_run"));
  // Missing from the JSON: loads, with factor 1.
  const MachineProfile reread = MachineProfile::from_json(old.to_json(), "old.json");
  EXPECT_FALSE(reread.has_co_run());

  d.has_co_run = true;
  d.co_run = co_run_of(1.104, 1.021);
  const MachineProfile fresh(d, "new.json");
  const nlohmann::json j = fresh.to_json();
  ASSERT_TRUE(j.contains("co_run"));
  EXPECT_EQ(j["co_run"], (nlohmann::json{{"ranks", 2}, {"computing", 1.104}, {"polling", 1.021}}));
  const MachineProfile back = MachineProfile::from_json(j, "new.json");
  EXPECT_TRUE(back.has_co_run());
  EXPECT_DOUBLE_EQ(back.co_run().computing, 1.104);
  EXPECT_DOUBLE_EQ(back.co_run().polling, 1.021);
  EXPECT_EQ(back.co_run().ranks, 2);
  EXPECT_EQ(back.to_json(), j);
}

TEST(MachineProfileCoRun, AMalformedEntryIsAnErrorNamingTheKey) {
  MachineProfileData d = synthetic_profile_data();
  d.has_co_run = true;
  d.co_run = co_run_of(1.1, 1.0);
  const nlohmann::json good = MachineProfile(d, "p.json").to_json();
  auto error = [](const nlohmann::json& j) {
    return error_of([&] { MachineProfile::from_json(j, "p.json"); });
  };
  nlohmann::json j = good;
  j["co_run"]["computing"] = -1.1;
  EXPECT_NE(error(j).find("p.json"), std::string::npos) << error(j);
  EXPECT_NE(error(j).find("co_run.computing"), std::string::npos) << error(j);
  j = good;
  j["co_run"]["polling"] = "fast";
  EXPECT_NE(error(j).find("co_run.polling"), std::string::npos) << error(j);
  j = good;
  j["co_run"].erase("computing");
  EXPECT_NE(error(j).find("co_run.computing"), std::string::npos) << error(j);
  j = good;
  j["co_run"]["slowdown"] = 1.2;
  EXPECT_NE(error(j).find("co_run.slowdown"), std::string::npos) << error(j);
  j = good;
  j["co_run"]["ranks"] = 1;
  EXPECT_NE(error(j).find("co_run.ranks"), std::string::npos) << error(j);
  j = good;
  j["co_run"] = 1.1;
  EXPECT_NE(error(j).find("co_run"), std::string::npos) << error(j);
}

TEST(CoRunCostModel, OneRankIsUnchanged) {
  const TrainConfig c = co_run_config("");
  const StepPrediction alone = co_run_predict(c, CoRunCpu(co_run_of(1, 1)));
  const StepPrediction slowed = co_run_predict(c, CoRunCpu(co_run_of(1.25, 1.1)));
  EXPECT_EQ(slowed.step_s, alone.step_s);
  EXPECT_EQ(slowed.compute_s, alone.compute_s);
}

TEST(CoRunCostModel, ASingleProgramComputesAtTheComputingFactor) {
  for (const char* mesh : {"data=2", "model=2"}) {
    const TrainConfig c = co_run_config(mesh);
    const StepPrediction base = co_run_predict(c, CoRunCpu(co_run_of(1, 1)));
    const StepPrediction slowed = co_run_predict(c, CoRunCpu(co_run_of(1.25, 1.1)));
    EXPECT_NEAR(slowed.compute_s, 1.25 * base.compute_s, 1e-12 * base.compute_s) << mesh;
    // Collectives were measured with every rank in them: not slowed (the
    // optimizer's 4-byte norm all-reduce aside, its passes are).
    EXPECT_GT(slowed.optimizer_s, base.optimizer_s) << mesh;
    EXPECT_GT(slowed.step_s, base.step_s + 0.2 * base.compute_s) << mesh;
  }
  // A node of one core: the two ranks share it (compute_share 2) and no
  // other core runs beside it: no co-run factor.
  const TrainConfig c = co_run_config("data=2");
  EXPECT_EQ(co_run_predict(c, CoRunCpu(co_run_of(1.25, 1.1), 1)).compute_s,
            co_run_predict(c, CoRunCpu(co_run_of(1, 1), 1)).compute_s);
}

TEST(CoRunCostModel, AFactorBelowOneIsTakenAsOne) {
  // A rank measured faster beside a busy one (this machine, quiet: 0.98 and
  // 0.96) is noise: the prediction is factor 1's, for a single program and
  // for a pipeline that overlaps.
  for (const auto& [mesh, microbatches] :
       std::vector<std::pair<std::string, int>>{{"data=2", 1}, {"pipe=2", 8}}) {
    const TrainConfig c = co_run_config(mesh, microbatches);
    EXPECT_EQ(co_run_predict(c, CoRunCpu(co_run_of(0.98, 0.96))).step_s,
              co_run_predict(c, CoRunCpu(co_run_of(1, 1))).step_s)
        << mesh;
  }
}

TEST(CoRunCostModel, APipelineIsSlowedByHowMuchItsRanksOverlap) {
  // One micro-batch under gpipe: the ranks take turns, so the other one is
  // always waiting (polling): every action at the polling factor.
  TrainConfig c = co_run_config("pipe=2", 1);
  const StepPrediction base1 = co_run_predict(c, CoRunCpu(co_run_of(1, 1)));
  const StepPrediction only_computing = co_run_predict(c, CoRunCpu(co_run_of(1.25, 1)));
  const StepPrediction polling = co_run_predict(c, CoRunCpu(co_run_of(1.25, 1.1)));
  EXPECT_NEAR(only_computing.compute_s, base1.compute_s, 1e-9 * base1.compute_s);
  EXPECT_NEAR(polling.compute_s, 1.1 * base1.compute_s, 1e-9 * base1.compute_s);
  // Eight: the ranks overlap most of the time, so the compute grows by more
  // than the polling factor and less than the computing one.
  c.microbatches = 8;
  const StepPrediction base8 = co_run_predict(c, CoRunCpu(co_run_of(1, 1)));
  const StepPrediction slowed8 = co_run_predict(c, CoRunCpu(co_run_of(1.25, 1.1)));
  const double ratio = slowed8.compute_s / base8.compute_s;
  EXPECT_GT(ratio, 1.15);
  EXPECT_LT(ratio, 1.25);
  EXPECT_GT(slowed8.step_s, base8.step_s);
  EXPECT_NEAR(
      slowed8.step_s,
      slowed8.compute_s + slowed8.bubble_s + slowed8.optimizer_s +
          [&] {
            double t = 0;
            for (const auto& [axis, s] : slowed8.exposed_comm_s) t += s;
            return t;
          }(),
      1e-9);
  // With other axes the same stage's peers always compute beside it.
  TrainConfig d = co_run_config("pipe=2,data=2", 1);
  const StepPrediction base_d = co_run_predict(d, CoRunCpu(co_run_of(1, 1)));
  const StepPrediction slowed_d = co_run_predict(d, CoRunCpu(co_run_of(1.25, 1.1)));
  EXPECT_NEAR(slowed_d.compute_s, 1.25 * base_d.compute_s, 1e-9 * base_d.compute_s);
}

TEST(CoRunCostModel, AClusterHasNoCoRunFactor) {
  const ClusterSpec cluster = ClusterSpec::from_json(
      nlohmann::json::parse(R"({"name": "t", "nodes": 2, "devices_per_node": 2,
        "device": {"name": "d", "peak_tflops": {"bf16": 100, "f32": 10},
                   "memory_bandwidth_gbs": 1000, "memory_gib": 40},
        "links": {"intra_node": {"bandwidth_gbs": 100, "latency_us": 2},
                  "inter_node": {"bandwidth_gbs": 10, "latency_us": 5}}})"),
      "c.json");
  EXPECT_DOUBLE_EQ(cluster.co_run().computing, 1);
  EXPECT_DOUBLE_EQ(cluster.co_run().polling, 1);
}

}  // namespace
}  // namespace tessel::plan
