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
#include "tessel/kernels/einsum_bf16.h"

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

// The transport a multi-host job takes: Open MPI's TCP byte-transfer layer
// (here over loopback) instead of shared memory. Same losses and weights.
TEST_F(LayoutInvariance, GptOverTcpLoopback) {
  TrainRun got = train("tcp_data2_model2", gpt_config(), 4, "data=2,model=2", "", "",
                       "--mca btl self,tcp --mca btl_tcp_if_include lo");
  expect_same(got, reference("gpt"), "data=2,model=2 over TCP");
}

// The planner's choice joins the matrix: `train --plan auto` on 4 ranks
// takes the top plan for this machine (from a profile `calibrate --quick`
// writes into a private cache) and trains to the same losses and weights as
// one process, whatever mesh, schedule, ZeRO stage or recomputation it chose.
TEST_F(LayoutInvariance, PlanAutoMatchesSingleProcess) {
  TrainRun got = train_plan_auto("plan_auto_4", gpt_config(), 4);
  expect_same(got, reference("gpt"), "train --plan auto on 4 ranks");
}

// Dropout masks are keyed by (seed, label, step, global row, element), so a
// sharded, micro-batched or pipelined run drops exactly what one process
// drops, and a new step draws a new mask.
nlohmann::json dropout_config() {
  nlohmann::json config = gpt_config();
  config["dropout"] = 0.1;
  return config;
}

TEST_F(LayoutInvariance, GptWithDropoutDataParallel) {
  const TrainRun want = train("dropout_single_data", dropout_config(), 0);
  expect_same(train("dropout_data2", dropout_config(), 2, "data=2"), want, "dropout, data=2");
  // The masks matter: the losses differ from the run without dropout.
  EXPECT_NE(want.steps.back()["loss"].get<double>(),
            reference("gpt").steps.back()["loss"].get<double>());
}

// Tensor parallelism draws the same masks too. AdamW's eps is 1e-6 here, not
// 1e-8: with dropout 0.1 this model has two block0.mlp.w1 elements whose
// step-0 gradient cancels to about 2e-9 (a millionth of the typical one),
// and the model split sums the residual stream's gradient in another order
// (all-reduced halves), a rounding-level change that is 50% of such a
// gradient. With eps 1e-8 AdamW divides by about |g| and turns that into an
// lr-sized update difference (4e-5 relative on w1 after 10 steps, the drift
// once blamed on the masks); with eps 1e-6 every tensor agrees within 1.5e-6.
TEST_F(LayoutInvariance, GptWithDropoutTensorParallel) {
  nlohmann::json config = dropout_config();
  config["eps"] = 1e-6;
  const TrainRun want = train("dropout_single_tp", config, 0);
  expect_same(train("dropout_model2", config, 2, "model=2"), want, "dropout, model=2");
  expect_same(train("dropout_data2_model2", config, 4, "data=2,model=2"), want,
              "dropout, data=2,model=2");
}

// Micro-batch m's row r is global row m * rows + r: gradient accumulation on
// one process and a two-stage pipeline draw the masks of the whole batch.
TEST_F(LayoutInvariance, GptWithDropoutMicroBatchesAndPipelines) {
  const TrainRun want = train("dropout_single_micro", dropout_config(), 0);
  expect_same(train("dropout_accumulate4", dropout_config(), 0, "", "", "--microbatches 4"), want,
              "dropout, 4 micro-batches on one process");
  expect_same(
      train("dropout_pipe2", dropout_config(), 2, "pipe=2", "", "--schedule 1f1b --microbatches 4"),
      want, "dropout, pipe=2 1f1b with 4 micro-batches");
  expect_same(train("dropout_pipe2_data2", dropout_config(), 4, "pipe=2,data=2", "",
                    "--schedule 1f1b --microbatches 2"),
              want, "dropout, pipe=2,data=2 with 2 micro-batches");
}

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
  c["shard"] = {{"block0.mlp.act", ""}, {"block1.attn.core.out", "seq=model"}};
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

// ZeRO stages 1, 2 and 3: optimizer state, gradients and (stage 3)
// parameters sharded over the data axis give the same losses and weights as
// one process (and as plain data parallelism), on data=2, data=4 and
// data=2,model=2, also with recomputed blocks. The stage is the digit after
// "zero" in the case's name.
class ZeroLayouts : public LayoutInvariance, public ::testing::WithParamInterface<MeshCase> {};

TEST_P(ZeroLayouts, MatchesSingleProcess) {
  const MeshCase& c = GetParam();
  nlohmann::json config = gpt_config();
  config["zero"] = c.name[4] - '0';
  if (std::string(c.name).find("recompute") != std::string::npos) config["recompute"] = "blocks";
  expect_same(train(c.name, config, c.ranks, c.mesh), reference("gpt"), c.name);
}

INSTANTIATE_TEST_SUITE_P(Zero, ZeroLayouts,
                         ::testing::Values(MeshCase{"zero1_data2", 2, "data=2", ""},
                                           MeshCase{"zero2_data2", 2, "data=2", ""},
                                           MeshCase{"zero1_data4", 4, "data=4", ""},
                                           MeshCase{"zero2_data4", 4, "data=4", ""},
                                           MeshCase{"zero2_data2_model2", 4, "data=2,model=2", ""},
                                           MeshCase{"zero3_data2", 2, "data=2", ""},
                                           MeshCase{"zero3_data4", 4, "data=4", ""},
                                           MeshCase{"zero3_data2_model2", 4, "data=2,model=2", ""},
                                           MeshCase{"zero3_recompute_data2_model2", 4,
                                                    "data=2,model=2", ""}),
                         [](const auto& info) { return std::string(info.param.name); });

// ZeRO's flat chunks where the data size divides no block of the model
// (data=3: the last chunk of each is padded), in a single program and on a
// pipeline: the same training as one process.
TEST_F(LayoutInvariance, ZeroPadsBlocksTheDataSizeDoesNotDivide) {
  nlohmann::json config = gpt_config();
  config["batch"] = 12;
  config["steps"] = 6;
  config["eval_every"] = 3;
  const TrainRun single = train("zero_pad_single", config, 0);
  config["zero"] = 1;
  expect_same(train("zero1_data3", config, 3, "data=3"), single, "zero 1 on data=3");
  config["zero"] = 2;
  expect_same(train("zero2_pipe2_data3", config, 6, "pipe=2,data=3", "", "--microbatches 2"),
              single, "zero 2 on pipe=2,data=3");
}

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

// ZeRO-3 stores each parameter as its data-axis shard and gathers it on use,
// once in forward and once more in backward, so per step the data axis
// carries the gradients' reduce-scatter plus two parameter all-gathers: in
// ring wire bytes 1.5x plain data parallelism's all-reduce (which is a
// reduce-scatter plus one all-gather). Exactly, the stated differences:
// backward reads a parameter only to form an input gradient, so the
// parameters it never reads are not gathered there — the position table, the
// LayerNorm betas and every bias but b1 (bias_gelu's gradient reads its
// bias) — and the loss, bucketed with the gradients under data parallelism,
// is all-reduced alone (one all-reduce's wire bytes of 4 bytes instead of
// 1.5x). Model-state bytes per rank are 16 psi / N: every parameter of this
// model divides over N = 2 and 4 (none stays replicated). With the model
// axis too (data=2,model=2), the parameters whose leading dim is split on
// `model` (wte, wo, w2, bq, bv, b1) stay replicated on data with their
// gradients, but their AdamW moments are flat chunks, halved on data like
// every other's: the expected bytes are summed parameter by parameter from
// the checkpoint's dim names.
TEST_F(LayoutInvariance, ZeroThreeShardsAllModelStateAndMovesOneAndAHalfTimesTheBytes) {
  auto summary = [&](const std::string& name) {
    return nlohmann::json::parse(std::ifstream(root() / name / "out" / "summary.json"));
  };
  auto wire = [](const TrainRun& r, const char* kind) {
    const nlohmann::json& line = r.steps.at(1);
    return line["comm"]["data"].contains(kind)
               ? line["comm"]["data"][kind]["wire_bytes"].get<int64_t>()
               : int64_t{0};
  };
  auto model_state = [&](const std::string& name) {
    const nlohmann::json s = summary(name)["model_state_bytes_per_rank"];
    return s["parameters"].get<int64_t>() + s["gradients"].get<int64_t>() +
           s["optimizer"].get<int64_t>();
  };
  for (int n : {2, 4}) {
    std::string mesh = "data=" + std::to_string(n);
    nlohmann::json config = gpt_config();
    config["batch"] = 32;  // see DataParallelMovesTheGradientBytesInBuckets
    TrainRun dp = train("zero3_dp_" + mesh, config, n, mesh);
    config["zero"] = 3;
    TrainRun z = train("zero3_count_" + mesh, config, n, mesh);
    int64_t psi = 0, unread_in_backward = 0;
    for (const TensorRecord& t : dp.params.tensors) {
      psi += t.bytes.size() / 4;
      const std::string& p = t.name;
      auto ends = [&](const std::string& tail) {
        return p.size() >= tail.size() && p.compare(p.size() - tail.size(), tail.size(), tail) == 0;
      };
      if (p == "wpe" || ends(".beta") || ends(".bq") || ends(".bv") || ends(".bo") || ends(".b2"))
        unread_in_backward += t.bytes.size();
    }
    EXPECT_EQ(model_state("zero3_count_" + mesh), 16 * psi / n) << mesh;
    const nlohmann::json s = summary("zero3_count_" + mesh)["model_state_bytes_per_rank"];
    EXPECT_EQ(s["parameters"].get<int64_t>(), 4 * psi / n) << mesh;
    const int64_t dp_wire = wire(dp, "all_reduce");
    const int64_t z_wire =
        wire(z, "reduce_scatter") + wire(z, "all_gather") + wire(z, "all_reduce");
    EXPECT_EQ(2 * z_wire, 3 * dp_wire - 2 * (unread_in_backward + 4) * (n - 1) / n)
        << mesh << ": ZeRO-3 " << z_wire << " wire bytes, data parallel " << dp_wire;
    EXPECT_EQ(wire(z, "all_reduce"), 2 * 4 * (n - 1) / n) << mesh << ": only the loss";
    for (size_t k = 0; k < dp.steps.size(); ++k)
      EXPECT_NEAR(z.steps[k]["loss"].get<double>(), dp.steps[k]["loss"].get<double>(),
                  kRelTol * std::abs(dp.steps[k]["loss"].get<double>()));
  }
  // data=2,model=2: parameters split on the model axis by their leading dim
  // stay whole on data; every model-state byte is accounted for.
  nlohmann::json config = gpt_config();
  config["zero"] = 3;
  train("zero3_state_data2_model2", config, 4, "data=2,model=2");
  nlohmann::json manifest = nlohmann::json::parse(
      std::ifstream(root() / "zero3_state_data2_model2" / "out" / "checkpoint" / "manifest.json"));
  int64_t expected = 0;
  for (const auto& [name, dims] : manifest["param_dims"].items()) {
    const TensorRecord* t = reference("gpt").params.find(name);
    ASSERT_NE(t, nullptr) << name;
    auto on_model = [](const std::string& d) {
      return d == "heads" || d == "hidden" || d == "vocab";
    };
    int64_t split = 1;
    for (const auto& d : dims)
      if (on_model(d.get<std::string>())) split = 2;
    const int64_t block = static_cast<int64_t>(t->bytes.size() / 4) / split;
    if (!on_model(dims[0].get<std::string>()))
      expected += 16 * block / 2;  // ZeRO-3 shards it on data
    else
      expected += 4 * block + 4 * block + 8 * block / 2;  // whole, but flat moments
  }
  EXPECT_EQ(model_state("zero3_state_data2_model2"), expected);
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
// attention cores are split over heads like the stored ones (unfused), and
// the cloned norm outputs are gathered again under sequence parallelism
// (fused: norms and GELU only).
TEST_F(LayoutInvariance, SelectiveRecomputationOnDataAndModelAxes) {
  nlohmann::json config = gpt_config();
  config["attention"] = "unfused";
  const TrainRun single = train("single_gpt_unfused", config, 0);
  config["recompute"] = "selective";
  expect_same(train("selective_data2_model2", config, 4, "data=2,model=2"), single,
              "unfused attention, recompute selective on data=2,model=2");
  config = gpt_config();
  config["recompute"] = "selective";
  expect_same(train("selective_fused_sp", config, 4, "data=2,model=2",
                    "batch=data,heads=model,hidden=model,vocab=model,seq=model"),
              reference("gpt"), "recompute selective, sequence parallel, on data=2,model=2");
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

// Measured memory equals the prediction: on the GPT benchmark model
// (examples/gpt-bench.json, 10.8M parameters; 2 steps, 1 evaluation batch,
// 1 thread per rank) the peak of tensor storage each rank allocates
// (AlignedBuffer's counters: parameters, moments, both arenas, host buffers,
// the checkpoint's full-tensor buffer) is within 5% of what `train
// --dry-run` predicts for that rank (today it is exact), over ZeRO stages,
// recomputation and meshes.
struct MemoryCase {
  const char* name;
  int ranks;  // 0: a plain process
  const char* mesh;
  int zero;
  const char* recompute;
  const char* extra = "";  // pipeline options
};
void PrintTo(const MemoryCase& c, std::ostream* out) { *out << c.name; }

class MeasuredMemory : public LayoutInvariance, public ::testing::WithParamInterface<MemoryCase> {};

TEST_P(MeasuredMemory, TrackedPeakIsWithinFivePercentOfTheDryRunOnEveryRank) {
  const MemoryCase& c = GetParam();
  // bf16 runs on every CPU (oneDNN's matmul, or the widened-f32 route whose
  // scratch the plan counts too); its prediction is exact, byte for byte.
  const bool bf16 = std::string(c.extra).find("precision=bf16") != std::string::npos;
  nlohmann::json config = nlohmann::json::parse(
      std::ifstream(std::string(TESSEL_SOURCE_DIR) + "/examples/gpt-bench.json"));
  config["steps"] = 2;
  config["eval_batches"] = 1;
  config["threads"] = 1;
  config["zero"] = c.zero;
  config["recompute"] = c.recompute;
  train(c.name, config, c.ranks, c.mesh, "", c.extra);
  const fs::path dir = root() / c.name;
  nlohmann::json summary = nlohmann::json::parse(std::ifstream(dir / "out" / "summary.json"));
  const nlohmann::json& ranks = summary["memory_per_rank"];
  ASSERT_EQ(ranks.size(), static_cast<size_t>(std::max(1, c.ranks)));
  // The dry run's totals, one line per rank: "  R  <six sizes in MiB>  <total> MiB".
  int status = 0;
  std::string out = run(std::string(TESSEL_CLI_PATH) + " train --dry-run --config " +
                            (dir / "config.json").string() +
                            (*c.mesh ? std::string(" --mesh ") + c.mesh : "") + " " + c.extra,
                        &status);
  ASSERT_EQ(status, 0) << out;
  std::map<int, double> dry_total_mib;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    int rank = -1;
    std::vector<double> sizes;
    double v = 0;
    std::string unit;
    if (!(in >> rank)) continue;
    while (in >> v >> unit) sizes.push_back(v);
    if (!sizes.empty()) dry_total_mib[rank] = sizes.back();
  }
  for (const nlohmann::json& r : ranks) {
    const int rank = r["rank"];
    const double predicted = r["predicted_bytes"]["total"].get<double>();
    const double measured = r["measured_peak_tracked_bytes"].get<double>();
    EXPECT_LE(std::abs(measured - predicted), 0.05 * predicted)
        << c.name << " rank " << rank << ": measured " << measured << " B, predicted " << predicted
        << " B\n"
        << r.dump();
    const double device = r["predicted_bytes"]["device"].get<double>();
    const double measured_device = r["measured_peak_device_bytes"].get<double>();
    EXPECT_LE(std::abs(measured_device - device), 0.05 * device) << c.name << " rank " << rank;
    if (bf16) {
      EXPECT_EQ(measured, predicted)
          << c.name << " rank " << rank << " (" << kernels::bf16_matmul_note() << ")";
      EXPECT_EQ(measured_device, device) << c.name << " rank " << rank;
    }
    ASSERT_TRUE(dry_total_mib.count(rank)) << out;
    EXPECT_NEAR(dry_total_mib[rank], predicted / 1048576.0, 0.01) << c.name << "\n" << out;
  }
}

INSTANTIATE_TEST_SUITE_P(
    GptBench, MeasuredMemory,
    ::testing::Values(
        MemoryCase{"memory_single", 0, "", 0, "none"},
        MemoryCase{"memory_zero0_blocks_data2", 2, "data=2", 0, "blocks"},
        MemoryCase{"memory_zero1_data2", 2, "data=2", 1, "none"},
        MemoryCase{"memory_zero2_blocks_data4", 4, "data=4", 2, "blocks"},
        MemoryCase{"memory_zero3_data4", 4, "data=4", 3, "none"},
        MemoryCase{"memory_zero3_blocks_data2_model2", 4, "data=2,model=2", 3, "blocks"},
        MemoryCase{"memory_pipe2_1f1b", 2, "pipe=2", 0, "none", "--schedule 1f1b --microbatches 4"},
        MemoryCase{"memory_pipe2_data2_gpipe_zero1", 4, "pipe=2,data=2", 1, "none",
                   "--schedule gpipe --microbatches 2"},
        // Asynchronous periodic saves: rank 0 holds a host copy of the whole state
        // (and every rank the sharded tensors, here the ZeRO-1 moments).
        MemoryCase{"memory_single_async_save", 0, "", 0, "none", "--checkpoint-every 1"},
        MemoryCase{"memory_zero1_data2_async_save", 2, "data=2", 1, "none", "--checkpoint-every 1"},
        MemoryCase{"memory_pipe2_async_save", 2, "pipe=2", 0, "none",
                   "--schedule 1f1b --microbatches 2 --checkpoint-every 1"},
        // Sharded tensors are snapshotted in one world sum: every rank holds them.
        MemoryCase{"memory_data2_model2_async_save", 4, "data=2,model=2", 0, "none",
                   "--checkpoint-every 1"},
        MemoryCase{"memory_pipe2_pipedream", 2, "pipe=2", 0, "none",
                   "--schedule pipedream --microbatches 4"},
        // bf16: the einsums' operand copies (bf16, or widened f32 where oneDNN
        // has no bf16 matmul) and oneDNN's scratchpad are planned scratch
        MemoryCase{"memory_bf16_single", 0, "", 0, "none", "--set precision=bf16"},
        MemoryCase{"memory_bf16_zero1_blocks_data2_model2", 4, "data=2,model=2", 1, "blocks",
                   "--set precision=bf16"},
        MemoryCase{"memory_bf16_pipe2_1f1b", 2, "pipe=2", 0, "none",
                   "--set precision=bf16 --schedule 1f1b --microbatches 4"},
        // bf16 gathers of ZeRO-3 weights; bf16 gradient buckets' work buffers
        MemoryCase{"memory_bf16_zero3_data2", 2, "data=2", 3, "none", "--set precision=bf16"},
        MemoryCase{"memory_bf16_grad_bf16_data2", 2, "data=2", 0, "none",
                   "--set precision=bf16 --set grad_reduce_precision=bf16"},
        // bf16 reduce-scatters' work buffers: ZeRO-2 gradients, and partial
        // sums (all-reduces; reduce-scatters under sequence parallelism)
        MemoryCase{"memory_bf16_zero2_grad_bf16_data2", 2, "data=2", 2, "none",
                   "--set precision=bf16 --set grad_reduce_precision=bf16"},
        MemoryCase{"memory_bf16_tp_bf16_model2", 2, "model=2", 0, "none",
                   "--set precision=bf16 --set tp_comm_precision=bf16"},
        MemoryCase{"memory_bf16_sp_bf16_model2", 2, "model=2", 0, "none",
                   "--set precision=bf16 --set tp_comm_precision=bf16 "
                   "--layout heads=model,hidden=model,vocab=model,seq=model"}),
    [](const auto& info) { return std::string(info.param.name); });

// Bad meshes and layouts stop every rank with a clear error and a non-zero
// exit before any compute — and never hang (the command has a time limit).
TEST_F(LayoutInvariance, BadMeshOrLayoutFailsOnEveryRankWithoutHanging) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--mesh data=4", "mesh data=4 has 4 ranks but 2 processes are running"},
      {"--mesh data=2 --layout batch=dp",
       "mapped to axis 'dp', which is not an axis of mesh data=2"},
      {"--mesh model=2 --layout hiden=model", "no tensor of the model has that dim"},
      {"--mesh model=2 --layout heads=model,embed=model,heads=model", "mapped to two axes"},
  };
  for (const auto& [args, message] : cases) expect_fails("bad", gpt_config(), 2, args, message);
  // An axis that does not divide a dim: the 4 heads over model=8.
  expect_fails("bad8", gpt_config(), 8, "--mesh model=8",
               "heads=4 to mesh axis 'model' of size 8, which does not divide it");
}

}  // namespace
}  // namespace tessel
