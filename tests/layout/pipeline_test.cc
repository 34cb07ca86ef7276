// Pipelines under real mpirun: every synchronous schedule, alone and with
// data, tensor and sequence parallelism, trains to the same losses and
// parameters as one process with the same global batch; the pipe axis moves
// exactly the activations and gradients the schedule sends; bad pipeline
// settings fail on every rank before any compute.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

// Eight blocks, so pipe=4 with two chunks per rank still has a block per stage.
nlohmann::json pipeline_config() {
  nlohmann::json c = gpt_config();
  c["n_layer"] = 8;
  c["d_model"] = 32;
  c["n_head"] = 2;
  return c;
}

class Pipelines : public LayoutInvariance {
 protected:
  static const TrainRun& single() {
    static TrainRun r = train("pipeline_single", pipeline_config(), 0);
    return r;
  }
};

struct PipeCase {
  const char* name;
  int ranks;
  const char* mesh;
  const char* args;
};
void PrintTo(const PipeCase& c, std::ostream* out) { *out << c.name; }

class PipelineSchedules : public Pipelines, public ::testing::WithParamInterface<PipeCase> {};

TEST_P(PipelineSchedules, MatchSingleProcess) {
  const PipeCase& c = GetParam();
  TrainRun got = train(c.name, pipeline_config(), c.ranks, c.mesh, "", c.args);
  expect_same(got, single(), c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelineSchedules,
    ::testing::Values(
        PipeCase{"accumulate4_one_process", 0, "", "--microbatches 4"},
        PipeCase{"gpipe_pipe2", 2, "pipe=2", "--schedule gpipe --microbatches 4"},
        PipeCase{"1f1b_pipe2", 2, "pipe=2", "--schedule 1f1b --microbatches 4"},
        PipeCase{"interleaved_pipe2", 2, "pipe=2",
                 "--schedule interleaved --chunks 2 --microbatches 4"},
        PipeCase{"zbh1_pipe2", 2, "pipe=2", "--schedule zb-h1 --microbatches 4"},
        PipeCase{"gpipe_pipe4", 4, "pipe=4", "--schedule gpipe --microbatches 8"},
        PipeCase{"1f1b_pipe4", 4, "pipe=4", "--schedule 1f1b --microbatches 8"},
        PipeCase{"interleaved_pipe4", 4, "pipe=4",
                 "--schedule interleaved --chunks 2 --microbatches 4"},
        PipeCase{"zbh1_pipe4", 4, "pipe=4", "--schedule zb-h1 --microbatches 8"},
        PipeCase{"manual_stages_pipe2", 2, "pipe=2", "--microbatches 2 --stages 3"},
        PipeCase{"pipe2_data2", 4, "pipe=2,data=2", "--schedule 1f1b --microbatches 2"},
        PipeCase{"pipe2_model2", 4, "pipe=2,model=2", "--schedule 1f1b --microbatches 2"},
        PipeCase{"pipe2_model2_sequence_parallel", 4, "pipe=2,model=2",
                 "--schedule zb-h1 --microbatches 2 "
                 "--layout heads=model,hidden=model,vocab=model,seq=model"},
        PipeCase{"pipe2_data2_model2", 8, "pipe=2,data=2,model=2",
                 "--schedule 1f1b --microbatches 2"},
        PipeCase{"pipe2_recompute", 2, "pipe=2", "--microbatches 2 --recompute blocks"},
        PipeCase{"pipe2_data2_zero1", 4, "pipe=2,data=2", "--microbatches 2 --zero 1"},
        PipeCase{"pipe2_data2_zero2_model2", 8, "pipe=2,data=2,model=2",
                 "--schedule zb-h1 --microbatches 2 --zero 2"},
        PipeCase{"pipe2_selective", 2, "pipe=2", "--microbatches 2 --recompute selective"},
        PipeCase{"pipe2_grouped_first4_selective", 2, "pipe=2",
                 "--microbatches 2 --recompute blocks:2:4+selective"}),
    [](const auto& info) { return std::string(info.param.name); });

// Micro-batches without a pipe axis are gradient accumulation, for any
// model: the MLP on data=2 with 4 micro-batches equals one process.
TEST_F(Pipelines, MlpAccumulatesMicroBatchesOnDataParallelRanks) {
  expect_same(train("mlp_accumulate", mlp_config(), 2, "data=2", "", "--microbatches 4"),
              reference("mlp"), "mlp data=2, 4 micro-batches");
}

// `recompute: auto` on a pipeline: the memory judge is the pipelined plan
// (one arena per micro-batch in flight per stage); every rank makes the
// same choice, and the run still matches one process.
TEST_F(Pipelines, AutoRecomputationFitsTheBudget) {
  const std::string limit = budget_for_recompute(pipeline_config(), "pipe=2", 2);
  const std::string chosen = auto_choice(pipeline_config(), "pipe=2", 2, limit);
  EXPECT_NE(chosen, "none");
  TrainRun r = train("pipe2_auto", pipeline_config(), 2, "pipe=2", "",
                     "--microbatches 2 --recompute auto --memory-limit " + limit);
  expect_same(r, single(), "pipe2 recompute auto");
  EXPECT_NE(r.output.find("recompute auto: chose " + chosen + " ("), std::string::npos) << r.output;
}

// pipe=2 with m micro-batches: per step, rank 0 sends each micro-batch's
// activation (rows/m x seq x embed floats) and receives its gradient; the
// only other pipe traffic is the tied embedding's gradient sum and the loss.
TEST_F(Pipelines, PipeAxisMovesOneActivationAndOneGradientPerMicroBatch) {
  nlohmann::json config = pipeline_config();
  const int m = 4;
  TrainRun r = train("pipe_bytes", config, 2, "pipe=2", "", "--microbatches 4");
  ASSERT_FALSE(r.steps.empty());
  const int64_t rows = config["batch"], seq = config["context"], embed = config["d_model"];
  const int64_t activation_bytes = rows / m * seq * embed * 4;
  for (int s = 0; s < static_cast<int>(r.steps.size()); ++s) {
    auto [sends, send_bytes] = comm(r, s, "pipe", "send");
    auto [recvs, recv_bytes] = comm(r, s, "pipe", "recv");
    EXPECT_EQ(sends, m) << "step " << s;
    EXPECT_EQ(send_bytes, m * activation_bytes) << "step " << s;
    EXPECT_EQ(recvs, m) << "step " << s;
    EXPECT_EQ(recv_bytes, m * activation_bytes) << "step " << s;
    // Tied embedding (vocab x embed) plus the loss scalar.
    auto [reduces, reduce_bytes] = comm(r, s, "pipe", "all_reduce");
    EXPECT_EQ(reduces, 2) << "step " << s;
    EXPECT_EQ(reduce_bytes, 256 * embed * 4 + 4) << "step " << s;
  }
}

// The summary reports each rank's measured bubble next to the schedule's,
// and --trace writes a Chrome trace with every action of every rank.
TEST_F(Pipelines, TraceAndBubbleReport) {
  fs::path trace = root() / "trace.json";
  TrainRun r = train("trace", pipeline_config(), 2, "pipe=2", "",
                     "--schedule 1f1b --microbatches 4 --trace " + trace.string());
  std::ifstream summary_file(root() / "trace" / "out" / "summary.json");
  nlohmann::json summary = nlohmann::json::parse(summary_file);
  const auto& p = summary["pipeline"];
  ASSERT_EQ(p["measured_bubble"].size(), 2u);
  // (p-1)/(m+p-1) = 1/5 for 1F1B with unit costs, on both ranks.
  EXPECT_NEAR(p["theoretical_bubble"][0].get<double>(), 0.2, 1e-12);
  for (const auto& b : p["measured_bubble"]) {
    EXPECT_GE(b.get<double>(), 0.0);
    EXPECT_LT(b.get<double>(), 1.0);
  }
  nlohmann::json t = nlohmann::json::parse(std::ifstream(trace));
  std::map<int, int> forwards, backwards;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string name = e["name"];
    if (name.rfind("F ", 0) == 0) ++forwards[e["tid"].get<int>()];
    if (name.rfind("B ", 0) == 0) ++backwards[e["tid"].get<int>()];
  }
  const int steps = static_cast<int>(r.steps.size());
  for (int rank : {0, 1}) {
    EXPECT_EQ(forwards[rank], 4 * steps) << "rank " << rank;
    EXPECT_EQ(backwards[rank], 4 * steps) << "rank " << rank;
  }
}

// Asynchronous pipelines do not equal the synchronous run by design (each
// micro-batch is its own optimizer step on slightly stale weights) but must
// train: after 30 steps on pipe=4 with 8 micro-batches the loss falls below
// 90% of its start and lands within 15% of synchronous 1F1B's, and each
// rank holds exactly as many weight versions as the method defines (the
// schedule checker's count: p - r for PipeDream, at most 2 for 2BW, 1 for
// XPipe's predicted weights).
TEST_F(Pipelines, AsynchronousSchedulesTrainAndHoldTheirWeightVersions) {
  nlohmann::json config = pipeline_config();
  config["steps"] = 30;
  config["n_layer"] = 4;
  auto last_loss = [](const TrainRun& r) { return r.steps.back()["loss"].get<double>(); };
  TrainRun sync = train("sync_1f1b", config, 4, "pipe=4", "", "--schedule 1f1b --microbatches 8");
  ASSERT_FALSE(sync.steps.empty());
  const double start = sync.steps.front()["loss"];
  const std::map<std::string, std::vector<int>> versions = {
      {"pipedream", {4, 3, 2, 1}}, {"2bw", {2, 2, 2, 1}}, {"xpipe", {1, 1, 1, 1}}};
  for (const auto& [schedule, expected] : versions) {
    TrainRun r = train("async_" + schedule, config, 4, "pipe=4", "",
                       "--schedule " + schedule + " --microbatches 8");
    ASSERT_FALSE(r.steps.empty()) << schedule;
    EXPECT_LT(last_loss(r), 0.9 * start) << schedule;
    EXPECT_LT(std::abs(last_loss(r) - last_loss(sync)), 0.15 * last_loss(sync)) << schedule;
    std::ifstream in(root() / ("async_" + schedule) / "out" / "summary.json");
    nlohmann::json summary = nlohmann::json::parse(in);
    EXPECT_EQ(summary["pipeline"]["weight_versions"].get<std::vector<int>>(), expected) << schedule;
  }
}

// Bad pipeline settings: a clear error on every rank, no hang, no compute.
TEST_F(Pipelines, BadSettingsFailClearly) {
  nlohmann::json config = pipeline_config();
  config["n_layer"] = 2;
  const std::vector<std::tuple<int, std::string, std::string>> cases = {
      {4, "--mesh pipe=4 --microbatches 4", "4 stages but the model has only 2 blocks"},
      {2, "--mesh pipe=2 --microbatches 3", "'microbatches' (3) must divide 'batch' (8)"},
      {2, "--mesh pipe=2 --microbatches 2 --schedule wavy", "unknown pipeline schedule 'wavy'"},
      {2, "--mesh pipe=2 --microbatches 2 --schedule gpipe --chunks 2", "got chunks=2"},
      {2, "--mesh pipe=2 --microbatches 2 --schedule interleaved --chunks 2",
       "4 stages but the model has only 2 blocks"},
      {2, "--mesh pipe=2 --microbatches 2 --stages 5", "stage boundary 5"},
      {2, "--mesh pipe=2 --microbatches 2 --zero 1", "the layout maps 'batch' to no mesh axis"},
      {4, "--mesh pipe=2,data=2 --microbatches 2 --zero 3",
       "'zero' 3 (parameters gathered on use)"},
  };
  for (const auto& [ranks, args, message] : cases)
    expect_fails("bad", config, ranks, args, message);
  // Interleaving needs the micro-batches to divide among the pipeline ranks.
  config["n_layer"] = 8;
  expect_fails("bad_interleaved", config, 4,
               "--mesh pipe=4 --schedule interleaved --chunks 2 --microbatches 2",
               "multiple of pipeline ranks, got microbatches=2 with ranks=4");
}

}  // namespace
}  // namespace tessel
