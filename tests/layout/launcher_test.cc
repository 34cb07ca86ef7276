// `tessel launch` restarts a failed job from its newest checkpoint: a rank
// SIGKILLs itself (TESSEL_FAULT_INJECT) at each of the five points, on the
// first attempt only, and the relaunched job's final parameters and AdamW
// moments, and every step's loss, are bitwise equal to the uninterrupted run
// on the same mesh (data=2, saving every 2 steps). The `_standby` case runs
// the launcher with --standby: the restart is the standby job, started up
// beforehand and told to go (apps/tessel/standby.h), with the same result.
// Its fault waits for the standby's readiness marker (after_file=), so the
// standby is always there to take over (without it, a fault before the
// launcher had started the standby made the restart a cold one).
#include "layout/layout_harness.h"

namespace tessel {
namespace {

struct FaultCase {
  const char* point;
  int rank;
  bool standby = false;
  std::string name() const { return std::string(point) + (standby ? "_standby" : ""); }
};
void PrintTo(const FaultCase& c, std::ostream* out) { *out << c.name(); }

class Launcher : public LayoutInvariance, public ::testing::WithParamInterface<FaultCase> {
 protected:
  static nlohmann::json config() {
    nlohmann::json c = gpt_config();
    c["steps"] = 6;
    c["eval_every"] = 3;
    return c;
  }
};

TEST_P(Launcher, RestartsAndFinishesBitwiseEqual) {
  const FaultCase& c = GetParam();
  static const TrainRun ref = train("launch_ref", config(), 2, "data=2");
  const fs::path dir = root() / ("launch_" + c.name());
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config().dump();
  const std::string after =
      c.standby ? ",after_file=" + (dir / "out" / ".standby-1.ready").string() : "";
  const std::string cmd = "TESSEL_FAULT_INJECT=rank=" + std::to_string(c.rank) +
                          ",step=3,point=" + c.point + after + " timeout 300 " + TESSEL_CLI_PATH +
                          " launch -n 2 --max-restarts 2" + (c.standby ? " --standby" : "") +
                          " --mpirun " + TESSEL_MPIEXEC + " -- train --config " +
                          (dir / "config.json").string() + " --out " + (dir / "out").string() +
                          " --mesh data=2 --checkpoint-every 2";
  int status = 0;
  const std::string out = run(cmd, &status);
  ASSERT_EQ(status, 0) << cmd << "\n" << out;
  EXPECT_NE(out.find("TESSEL_FAULT_INJECT: killing this rank"), std::string::npos) << out;
  EXPECT_NE(out.find("launch: attempt 0 failed"), std::string::npos) << out;
  EXPECT_NE(out.find("launch: attempt 1 finished"), std::string::npos) << out;
  if (c.standby) {
    EXPECT_NE(out.find("launch: standby for attempt 1 ready ("), std::string::npos) << out;
    EXPECT_NE(out.find("TESSEL_FAULT_INJECT: waiting for"), std::string::npos) << out;
    EXPECT_NE(out.find("the standby takes over"), std::string::npos) << out;
    for (const char* file : {".standby-1", ".standby-2", ".standby-1.ready", ".standby-2.ready"})
      EXPECT_FALSE(fs::exists(dir / "out" / file)) << file << " left behind";
  }
  EXPECT_NE(out.find("ETTR"), std::string::npos) << out;
  std::ifstream metrics(dir / "out" / "metrics.jsonl");
  std::string line;
  std::vector<nlohmann::json> steps;
  while (std::getline(metrics, line)) steps.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(steps.size(), ref.steps.size()) << out;
  for (size_t s = 0; s < steps.size(); ++s) {
    EXPECT_EQ(steps[s]["step"], ref.steps[s]["step"]);
    EXPECT_EQ(steps[s]["loss"].get<double>(), ref.steps[s]["loss"].get<double>()) << "step " << s;
  }
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    SafetensorsFile got = read_safetensors((dir / "out" / "checkpoint" / file).string());
    SafetensorsFile want =
        read_safetensors((root() / "launch_ref" / "out" / "checkpoint" / file).string());
    ASSERT_EQ(got.tensors.size(), want.tensors.size()) << file;
    for (const TensorRecord& t : want.tensors) {
      const TensorRecord* g = got.find(t.name);
      ASSERT_NE(g, nullptr) << t.name;
      EXPECT_TRUE(g->bytes == t.bytes) << c.point << ": " << file << " " << t.name;
    }
  }
}

// --elastic: rank 3 of a data=2,model=2 job is declared lost at step 3
// (`lose=1`). No plan fits 3 ranks for this GPT (batch 8, 4 heads, 2
// layers), so the launcher relaunches on 2 with the planner's top plan
// (`train --plan auto`, from a profile `calibrate --quick` writes into a
// private cache), resharding the step-2 checkpoint; the run ends within the
// layout-invariance tolerance of one process.
TEST_F(LayoutInvariance, ElasticLauncherRelaunchesOnTheRanksLeft) {
  nlohmann::json config = gpt_config();
  config["steps"] = 6;
  config["eval_every"] = 3;
  const TrainRun want = train("elastic_single", config, 0);
  const fs::path dir = root() / "elastic";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump();
  const std::string cache = "XDG_CACHE_HOME=" + (root() / "elastic_xdg_cache").string() + " ";
  int status = 0;
  const std::string calibrated =
      run(cache + TESSEL_CLI_PATH + " calibrate --quick --force", &status);
  ASSERT_EQ(status, 0) << calibrated;
  const std::string cmd =
      cache + "TESSEL_FAULT_INJECT=rank=3,step=3,point=forward,lose=1 timeout 300 " +
      TESSEL_CLI_PATH + " launch -n 4 --elastic 2 --max-restarts 1 --mpirun " + TESSEL_MPIEXEC +
      " -- train --config " + (dir / "config.json").string() + " --out " + (dir / "out").string() +
      " --mesh data=2,model=2 --checkpoint-every 2";
  const std::string out = run(cmd, &status);
  ASSERT_EQ(status, 0) << cmd << "\n" << out;
  EXPECT_NE(out.find("this rank is declared lost"), std::string::npos) << out;
  EXPECT_NE(out.find("rank(s) 3 declared lost; relaunching on 2 of the 3 ranks left"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("plan auto: the best of"), std::string::npos) << out;
  EXPECT_NE(out.find("launch: attempt 1 finished"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "out" / ".lost" / "rank-3")) << "lost marker left behind";
  expect_same(read_run(dir / "out", out, true), want, "elastic: 4 ranks, then 2");
}

// Without a rank count to go down to, the launcher gives up and says why.
TEST_F(LayoutInvariance, ElasticLauncherGivesUpBelowItsMinimum) {
  nlohmann::json config = gpt_config();
  config["steps"] = 6;
  const fs::path dir = root() / "elastic_min";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config.dump();
  int status = 0;
  const std::string out =
      run("TESSEL_FAULT_INJECT=rank=1,step=2,point=backward,lose=1 timeout 120 " +
              std::string(TESSEL_CLI_PATH) + " launch -n 2 --elastic 2 --mpirun " + TESSEL_MPIEXEC +
              " -- train --config " + (dir / "config.json").string() + " --out " +
              (dir / "out").string() + " --mesh data=2 --checkpoint-every 2",
          &status);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("rank(s) 1 declared lost; 1 rank(s) left, fewer than --elastic 2"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("launch: giving up"), std::string::npos) << out;
}

INSTANTIATE_TEST_SUITE_P(Faults, Launcher,
                         ::testing::Values(FaultCase{"forward", 1}, FaultCase{"backward", 1},
                                           FaultCase{"collective", 1}, FaultCase{"optimizer", 1},
                                           FaultCase{"save", 0}, FaultCase{"forward", 1, true}),
                         [](const auto& info) { return info.param.name(); });

}  // namespace
}  // namespace tessel
