// Layout invariance under real mpirun: every mesh and layout trains to the
// same losses and weights as one process.
//
// Each case runs `tessel train` on a small GPT (or the MLP) from the same
// seed — once as a plain process, once under `mpirun -n N` with a mesh — and
// compares the loss of every step and every parameter of the final
// checkpoint (checkpoints hold full tensors whatever the layout). The
// tolerance is one constant for all cases: relative 1e-5, per step for the
// loss and per tensor (||a - b|| / ||b||) for parameters. Collective counts
// per step are checked against what the parallelism predicts.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

struct MeshCase {
  const char* name;
  int ranks;
  const char* mesh;
  const char* layout;
};
void PrintTo(const MeshCase& c, std::ostream* out) { *out << c.name; }

class GptLayouts : public LayoutInvariance, public ::testing::WithParamInterface<MeshCase> {};

TEST_P(GptLayouts, MatchesSingleProcess) {
  const MeshCase& c = GetParam();
  TrainRun got = train(c.name, gpt_config(), c.ranks, c.mesh, c.layout);
  expect_same(got, reference("gpt"), c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Meshes, GptLayouts,
    ::testing::Values(MeshCase{"one_rank_mesh", 1, "", ""}, MeshCase{"data2", 2, "data=2", ""},
                      MeshCase{"model2", 2, "model=2", ""},
                      MeshCase{"data2_model2", 4, "data=2,model=2", ""},
                      MeshCase{"data4", 4, "data=4", ""}, MeshCase{"model4", 4, "model=4", ""},
                      MeshCase{"data2_model4", 8, "data=2,model=4", ""},
                      MeshCase{"sequence_parallel_model2", 2, "model=2",
                               "heads=model,hidden=model,vocab=model,seq=model"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(LayoutInvariance, MlpDataParallel) {
  expect_same(train("mlp_data2", mlp_config(), 2, "data=2"), reference("mlp"), "mlp data=2");
}

TEST_F(LayoutInvariance, MlpTensorParallel) {
  expect_same(train("mlp_model2", mlp_config(), 2, "model=2", "hidden=model"), reference("mlp"),
              "mlp model=2");
}

// Data parallelism: the gradients (and the loss) are all-reduced in buckets,
// one non-blocking all-reduce per bucket, and the bytes are exactly the
// gradient bytes (+4 for the loss scalar). The tiny model's gradients fit in
// one default (25 MiB) bucket; with 0.05 MiB buckets there are several and
// the bytes do not change. (The batch is large enough that all-reducing the
// embedding's gradient is cheaper than gathering its inputs: with fewer
// tokens than vocabulary rows the cost model rightly gathers instead.)
TEST_F(LayoutInvariance, DataParallelMovesTheGradientBytesInBuckets) {
  nlohmann::json config = gpt_config();
  config["batch"] = 32;
  TrainRun r = train("count_data2", config, 2, "data=2");
  int64_t param_bytes = 0;
  for (const TensorRecord& t : r.params.tensors) param_bytes += t.bytes.size();
  for (int s : {0, 3}) {
    auto [calls, bytes] = comm(r, s, "data", "all_reduce");
    EXPECT_EQ(bytes, param_bytes + 4) << "step " << s;
    EXPECT_EQ(calls, 1) << "step " << s;
  }
  nlohmann::json small = config;
  small["bucket_mib"] = 0.05;
  TrainRun many = train("count_data2_small_buckets", small, 2, "data=2");
  auto [calls, bytes] = comm(many, 0, "data", "all_reduce");
  EXPECT_EQ(bytes, param_bytes + 4);
  // Buckets close once they reach the size, so all but the last are full.
  EXPECT_GT(calls, 1);
  EXPECT_LE(calls, param_bytes / (0.05 * 1048576) + 1);
  for (size_t s = 0; s < r.steps.size(); ++s)
    EXPECT_EQ(r.steps[s]["loss"], many.steps[s]["loss"]) << "bucketing changed step " << s;
}

// Megatron tensor parallelism: per block two all-reduces of the activations
// (batch x seq x d_model) in forward and two in backward, one after the
// vocab-parallel embedding, one for the (vocab-parallel) LM head's input
// gradient, and the vocab-parallel cross-entropy's three row-statistic
// all-reduces (max, sum-exp, target logit) in forward and again in backward.
TEST_F(LayoutInvariance, TensorParallelMovesTwoActivationsPerBlockEachWay) {
  nlohmann::json c = gpt_config();
  TrainRun r = train("count_model2", c, 2, "model=2");
  const int64_t rows = c["batch"].get<int64_t>() * c["context"].get<int64_t>();
  const int64_t activation = rows * c["d_model"].get<int64_t>() * 4;
  const int64_t layers = c["n_layer"];
  auto [calls, bytes] = comm(r, 1, "model", "all_reduce");
  EXPECT_EQ(bytes, (4 * layers + 2) * activation + 6 * rows * 4);
  EXPECT_EQ(calls, 4 * layers + 2 + 6);
}

// A per-value override (GShard-style annotation) changes where one value
// lives — here the MLP activation is replicated instead of split by hidden,
// and the attention probabilities are split by query position — and the
// run still equals one process.
TEST_F(LayoutInvariance, PerValueOverridesKeepTheResult) {
  nlohmann::json c = gpt_config();
  c["shard"] = {{"block0.mlp.act", ""}, {"block1.attn.probs", "seq=model"}};
  expect_same(train("override_model2", c, 2, "model=2"), reference("gpt"), "overrides");
  nlohmann::json bad = gpt_config();
  bad["shard"] = {{"block0.mlp.act", "seq=model,hidden=model"}};
  fs::path dir = root() / "override_bad";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << bad.dump();
  int status = 0;
  std::string out = run("timeout 60 " + mpirun(2) + TESSEL_CLI_PATH + " train --config " +
                            (dir / "config.json").string() + " --out " + (dir / "out").string() +
                            " --mesh model=2",
                        &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("two dims of one tensor are placed on axis 'model'"), std::string::npos)
      << out;
}

// Sequence parallelism: each of tensor parallelism's activation all-reduces
// becomes a reduce-scatter to S(seq) plus an all-gather back — the same ring
// traffic (an all-reduce is a reduce-scatter followed by an all-gather) —
// and no activation-sized all-reduce is left.
TEST_F(LayoutInvariance, SequenceParallelTurnsAllReducesIntoReduceScatterAndAllGather) {
  nlohmann::json c = gpt_config();
  TrainRun sp =
      train("count_sp2", c, 2, "model=2", "heads=model,hidden=model,vocab=model,seq=model");
  const int64_t rows = c["batch"].get<int64_t>() * c["context"].get<int64_t>();
  const int64_t activation = rows * c["d_model"].get<int64_t>() * 4;
  const int64_t per_step = 4 * c["n_layer"].get<int64_t>() + 2;  // TP's all-reduces, see above
  auto [rs_calls, rs_bytes] = comm(sp, 1, "model", "reduce_scatter");
  auto [ag_calls, ag_bytes] = comm(sp, 1, "model", "all_gather");
  auto [ar_calls, ar_bytes] = comm(sp, 1, "model", "all_reduce");
  EXPECT_EQ(rs_calls, per_step);
  EXPECT_EQ(rs_bytes, per_step * activation);  // the all-reduces' payload, reduced and scattered
  EXPECT_GE(ag_calls, per_step);
  EXPECT_GE(ag_bytes, per_step * activation / 2);  // each rank contributes its half back
  EXPECT_LT(ar_bytes, activation) << "an activation-sized all-reduce is left";
}

// ZeRO stages 1 and 2: optimizer state and gradients sharded over the data
// axis give the same losses and weights as one process (and as plain data
// parallelism), on data=2, data=4 and data=2,model=2.
class ZeroLayouts : public LayoutInvariance, public ::testing::WithParamInterface<MeshCase> {};

TEST_P(ZeroLayouts, MatchesSingleProcess) {
  const MeshCase& c = GetParam();
  nlohmann::json config = gpt_config();
  config["zero"] = std::string(c.name).find("zero1") == 0 ? 1 : 2;
  expect_same(train(c.name, config, c.ranks, c.mesh), reference("gpt"), c.name);
}

INSTANTIATE_TEST_SUITE_P(Zero, ZeroLayouts,
                         ::testing::Values(MeshCase{"zero1_data2", 2, "data=2", ""},
                                           MeshCase{"zero2_data2", 2, "data=2", ""},
                                           MeshCase{"zero1_data4", 4, "data=4", ""},
                                           MeshCase{"zero2_data4", 4, "data=4", ""},
                                           MeshCase{"zero2_data2_model2", 4, "data=2,model=2", ""}),
                         [](const auto& info) { return std::string(info.param.name); });

// ZeRO moves what data parallelism moves: the gradients' reduce-scatter plus
// the updated parameters' all-gather carry exactly the all-reduce's ring
// traffic. Model-state bytes per rank follow the ZeRO formulas for f32 AdamW
// (psi parameters, N data ranks): stage 0 16 psi; stage 2 4 psi + 12 psi / N.
// Tessel's stage 1 already keeps only gradient shards (the reduce-scatter
// runs as each gradient is produced), so it has stage 2's footprint, below
// stage 1's 8 psi + 8 psi / N.
TEST_F(LayoutInvariance, ZeroMovesDataParallelBytesAndShardsModelState) {
  for (int n : {2, 4}) {
    std::string mesh = "data=" + std::to_string(n);
    nlohmann::json config = gpt_config();
    config["batch"] = 32;  // see DataParallelMovesTheGradientBytesInBuckets
    TrainRun dp = train("zero_dp_" + mesh, config, n, mesh);
    auto wire = [&](const TrainRun& r, const char* kind) {
      const nlohmann::json& line = r.steps.at(1);
      return line["comm"]["data"].contains(kind)
                 ? line["comm"]["data"][kind]["wire_bytes"].get<int64_t>()
                 : int64_t{0};
    };
    auto state = [&](const std::string& name) {
      nlohmann::json s =
          nlohmann::json::parse(std::ifstream(root() / name / "out" / "summary.json"));
      return s["model_state_bytes_per_rank"];
    };
    int64_t psi = 0;
    for (const TensorRecord& t : dp.params.tensors) psi += t.bytes.size() / 4;
    auto s0 = state("zero_dp_" + mesh);
    EXPECT_EQ(s0["parameters"].get<int64_t>() + s0["gradients"].get<int64_t>() +
                  s0["optimizer"].get<int64_t>(),
              16 * psi);
    for (int stage : {1, 2}) {
      config["zero"] = stage;
      std::string name = "zero" + std::to_string(stage) + "_count_" + mesh;
      TrainRun z = train(name, config, n, mesh);
      EXPECT_EQ(wire(z, "reduce_scatter") + wire(z, "all_gather") + wire(z, "all_reduce"),
                wire(dp, "all_reduce"))
          << mesh << " zero " << stage;
      auto s = state(name);
      EXPECT_EQ(s["parameters"].get<int64_t>(), 4 * psi);
      EXPECT_EQ(s["gradients"].get<int64_t>(), 4 * psi / n);
      EXPECT_EQ(s["optimizer"].get<int64_t>(), 8 * psi / n);
      for (size_t k = 0; k < dp.steps.size(); ++k)
        EXPECT_NEAR(z.steps[k]["loss"].get<double>(), dp.steps[k]["loss"].get<double>(),
                    kRelTol * std::abs(dp.steps[k]["loss"].get<double>()));
    }
  }
}

// Recomputation composes with sharding: the cloned blocks are lowered like
// any other nodes.
TEST_F(LayoutInvariance, RecomputedBlocksOnDataAndModelAxes) {
  nlohmann::json config = gpt_config();
  config["recompute"] = "blocks";
  expect_same(train("recompute_data2_model2", config, 4, "data=2,model=2"), reference("gpt"),
              "recompute blocks on data=2,model=2");
}

// Selective recomputation composes with sharding the same way: the cloned
// attention cores are split over heads like the stored ones.
TEST_F(LayoutInvariance, SelectiveRecomputationOnDataAndModelAxes) {
  nlohmann::json config = gpt_config();
  config["recompute"] = "selective";
  expect_same(train("selective_data2_model2", config, 4, "data=2,model=2"), reference("gpt"),
              "recompute selective on data=2,model=2");
}

// `auto` makes one choice on every rank (each predicts every rank's plan
// offline) under a budget that storing everything exceeds.
TEST_F(LayoutInvariance, AutoRecomputationOnDataAndModelAxes) {
  nlohmann::json config = gpt_config();
  const std::string limit = budget_for_recompute(gpt_config(), "data=2,model=2");
  const std::string chosen = auto_choice(gpt_config(), "data=2,model=2", 1, limit);
  EXPECT_NE(chosen, "none");
  config["recompute"] = "auto";
  config["memory_limit"] = limit;
  TrainRun r = train("auto_data2_model2", config, 4, "data=2,model=2");
  expect_same(r, reference("gpt"), "recompute auto on data=2,model=2");
  EXPECT_NE(r.output.find("recompute auto: chose " + chosen + " ("), std::string::npos) << r.output;
}

// `train --dry-run` predicts, per rank and without MPI or allocation, the
// memory the real run then has: parameters, optimizer state and the arena.
TEST_F(LayoutInvariance, DryRunPredictsTheRunsModelStateAndArena) {
  nlohmann::json config = gpt_config();
  config["zero"] = 2;
  TrainRun run_ = train("dry_zero2_data2", config, 2, "data=2");
  nlohmann::json summary =
      nlohmann::json::parse(std::ifstream(root() / "dry_zero2_data2" / "out" / "summary.json"));
  int status = 0;
  std::string out = run(std::string(TESSEL_CLI_PATH) + " train --dry-run --mesh data=2 --config " +
                            (root() / "dry_zero2_data2" / "config.json").string(),
                        &status);
  ASSERT_EQ(status, 0) << out;
  // Rank 0's line: "  0   <parameters> MiB <optimizer> MiB <arena> MiB ...".
  std::istringstream lines(out);
  std::string line;
  double params = -1, optimizer = -1, arena = -1;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    int rank = -1;
    std::string mib;
    if (in >> rank && rank == 0) in >> params >> mib >> optimizer >> mib >> arena;
  }
  const auto& state = summary["model_state_bytes_per_rank"];
  EXPECT_NEAR(params, state["parameters"].get<double>() / 1048576.0, 0.01) << out;
  EXPECT_NEAR(optimizer, state["optimizer"].get<double>() / 1048576.0, 0.01) << out;
  EXPECT_NEAR(arena, summary["arena_bytes_per_rank"].get<double>() / 1048576.0, 0.01) << out;
}

// Bad meshes and layouts stop every rank with a clear error and a non-zero
// exit before any compute — and never hang (the command has a time limit).
TEST_F(LayoutInvariance, BadMeshOrLayoutFailsOnEveryRankWithoutHanging) {
  fs::path dir = root() / "bad";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << gpt_config().dump();
  struct Bad {
    int ranks;
    std::string args, message;
  };
  const std::vector<Bad> cases = {
      {2, "--mesh data=4", "mesh data=4 has 4 ranks but 2 processes are running"},
      {2, "--mesh data=2 --layout batch=dp",
       "mapped to axis 'dp', which is not an axis of mesh data=2"},
      {2, "--mesh model=2 --layout hiden=model", "no tensor of the model has that dim"},
      {2, "--mesh model=2 --layout heads=model,embed=model,heads=model", "mapped to two axes"},
  };
  for (const Bad& b : cases) {
    int status = 0;
    std::string cmd = "timeout 60 " + mpirun(b.ranks) + TESSEL_CLI_PATH + " train --config " +
                      (dir / "config.json").string() + " --out " + (dir / "out").string() + " " +
                      b.args;
    std::string out = run(cmd, &status);
    EXPECT_NE(status, 0) << cmd << "\n" << out;
    EXPECT_NE(status, 124) << "timed out (hang): " << cmd;
    EXPECT_NE(out.find(b.message), std::string::npos) << cmd << "\n" << out;
    EXPECT_NE(out.find("[rank 0] error"), std::string::npos) << out;
  }
  // An axis that does not divide a dim: the 4 heads over model=8.
  int status = 0;
  std::string out = run("timeout 60 " + mpirun(8) + TESSEL_CLI_PATH + " train --config " +
                            (dir / "config.json").string() + " --out " + (dir / "out8").string() +
                            " --mesh model=8",
                        &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("heads=4 to mesh axis 'model' of size 8, which does not divide it"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace tessel
