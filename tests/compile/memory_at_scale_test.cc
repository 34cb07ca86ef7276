// Tessel's programs for published large runs (examples/published/) fit the
// 80 GiB GPUs the runs used, with the published mesh, schedule,
// micro-batches and ZeRO stage, full recomputation and Megatron's
// sequence-parallel layout (bf16): every pipeline stage's device memory
// (all but the host buffers) is under 80 GiB, and a stage's stash per
// micro-batch in flight is what full recomputation must keep: its blocks'
// inputs (Korthikanti et al.: 2sbh/t bytes per block in bf16; Tessel keeps
// them in f32, 4sbh/t), plus one more of that size, which the activation it
// sends (until the send completed), the gradient it receives and the
// gradient it sends take in turn (the activation received is the first
// block's input).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/pipeline_model.h"

namespace tessel {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TrainConfig published(const std::string& file, const std::string& schedule = "") {
  std::ifstream in(std::string(TESSEL_SOURCE_DIR) + "/examples/published/" + file);
  nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json pub = j["published"];
  j.erase("published");
  TrainConfig c = TrainConfig::from_json(j);
  const nlohmann::json& mesh = pub["mesh"];
  c.mesh = "pipe=" + std::to_string(mesh["pipe"].get<int>()) +
           ",data=" + std::to_string(mesh["data"].get<int>()) +
           ",model=" + std::to_string(mesh["model"].get<int>());
  c.layout = "batch=data,heads=model,hidden=model,vocab=model,seq=model";
  c.precision = "bf16";
  c.recompute = "blocks";
  c.microbatches = pub["microbatches"].get<int64_t>();
  c.schedule = schedule.empty() ? pub["schedule"].get<std::string>() : schedule;
  c.chunks = c.schedule == "interleaved" ? 2 : 1;
  c.zero = pub.value("zero", 0);
  c.validate(/*with_data=*/false);
  return c;
}

// A block's input per micro-batch on one rank, in f32, sequence parallel:
// 4 s b h / t bytes (b: a data rank's rows of a micro-batch).
double block_input_bytes(const TrainConfig& c, const Mesh& mesh) {
  const int64_t rows = c.batch / c.microbatches / mesh.size_of("data");
  return 4.0 * rows * c.context * c.d_model / mesh.size_of("model");
}

int blocks_of(const StagePartition& p, int stage) {
  const int end =
      stage + 1 < static_cast<int>(p.first_block.size()) ? p.first_block[stage + 1] : p.blocks;
  return end - p.first_block[stage];
}

// A middle stage keeps only its blocks' inputs per micro-batch in flight,
// plus one more of that size (the transfers' bytes).
void expect_stash_is_block_inputs(const TrainConfig& c, const Mesh& mesh,
                                  const CompiledRank& compiled, const RankMemory& m) {
  const PipelineModel& model = *compiled.pipeline;
  const double block_input = block_input_bytes(c, mesh);
  for (size_t k = 0; k < model.stages().size(); ++k) {
    const int s = model.stages()[k].graph.stage;
    const int blocks = blocks_of(model.partition(), s);
    const double stash = static_cast<double>(m.stage_arena[k]);
    EXPECT_GE(stash, blocks * block_input) << c.mesh << " stage " << s;
    EXPECT_LE(stash, (blocks + 1) * block_input * 1.02)
        << c.mesh << " stage " << s << ": " << format_bytes(m.stage_arena[k]) << " for " << blocks
        << " blocks";
  }
}

// docs/memory.md's formula for a pipelined rank without ZeRO: 18 bytes a
// parameter in bf16, and each stage's block inputs (4sbh/t) for every
// micro-batch in flight.
double formula_bytes(const TrainConfig& c, const Mesh& mesh, const CompiledRank& compiled,
                     const RankMemory& m) {
  const PipelineModel& model = *compiled.pipeline;
  const double block_input = block_input_bytes(c, mesh);
  double bytes = 18.0 * static_cast<double>(m.parameters) / 4;
  for (size_t k = 0; k < model.stages().size(); ++k) {
    const int s = model.stages()[k].graph.stage;
    const int blocks = blocks_of(model.partition(), s);
    bytes += m.in_flight[k] * blocks * block_input;
  }
  return bytes;
}

// Each pipeline stage's first rank (pipe is the first axis): its device
// memory and its stash (and, `near_formula`, within 20% of formula_bytes).
// Returns the largest device memory.
int64_t expect_fits_80gib(const TrainConfig& c, bool near_formula = false) {
  const Mesh mesh = Mesh::parse(c.mesh);
  const Layout layout = layout_for(c, mesh);
  const int stages = mesh.size_of("pipe");
  const int per_stage = mesh.rank_count() / stages;
  GraphCache cache;
  int64_t largest = 0;
  for (int stage = 0; stage < stages; ++stage) {
    const int rank = stage * per_stage;
    const CompiledRank compiled =
        compile_rank(c, mesh, layout, rank, CompileMode::kPlanOnly, nullptr, &cache);
    const RankMemory m = predict_rank_memory(compiled);
    largest = std::max(largest, m.device());
    EXPECT_LT(m.device(), 80 * kGiB)
        << c.mesh << " " << c.schedule << " rank " << rank << ": " << memory_breakdown(m);
    if (stage > 0 && stage < stages - 1) expect_stash_is_block_inputs(c, mesh, compiled, m);
    if (near_formula && (stages == 1 || stage < stages - 1)) {  // a last stage adds the head
      const double formula = formula_bytes(c, mesh, compiled, m);
      EXPECT_NEAR(static_cast<double>(m.device()) / formula, 1.0, 0.2)
          << c.mesh << " rank " << rank << ": formula " << formula / kGiB << " GiB";
    }
  }
  return largest;
}

TEST(MemoryAtScale, Gpt3_175bOn1024A100sFitsWithEachSchedule) {
  expect_fits_80gib(published("megatron-gpt3-175b-1024-a100.json"));  // interleaved
  expect_fits_80gib(published("megatron-gpt3-175b-1024-a100.json", "1f1b"));
}

TEST(MemoryAtScale, Megatron145bOn1536A100sFits) {
  expect_fits_80gib(published("megatron-145b-1536-a100.json"));
}

// BLOOM ran ZeRO 1 over 8 data ranks: every stage's AdamW moments are
// exactly 8/N bytes a parameter, an eighth of its f32 parameters' bytes
// twice over (flat chunks, whatever the tensor's layout: 20.2 GiB on the
// first stage when only untouched leading dims were sharded, 4.3 GiB now).
TEST(MemoryAtScale, Bloom176bOn384A100sFits) {
  const TrainConfig c = published("bloom-176b-384-a100.json");
  expect_fits_80gib(c);
  const Mesh mesh = Mesh::parse(c.mesh);
  const Layout layout = layout_for(c, mesh);
  GraphCache cache;
  for (int rank : {0, 32 * 5, 32 * 11}) {
    const RankMemory m = predict_rank_memory(
        compile_rank(c, mesh, layout, rank, CompileMode::kPlanOnly, nullptr, &cache));
    EXPECT_EQ(m.optimizer, 2 * m.parameters / 8) << "rank " << rank;
  }
}

TEST(MemoryAtScale, Megatron1tOn3072A100sFits) {
  expect_fits_80gib(published("megatron-1t-3072-a100.json"));
}

// Every row of Megatron-LM's Table 1 (Narayanan et al., SC21: heads,
// width, layers, tensor and pipeline degrees, GPUs, batch), micro-batch
// size 1, 1F1B, on 80 GiB A100s.
TEST(MemoryAtScale, EveryRowOfMegatronsTable1Fits) {
  struct Row {
    const char* params;
    int heads, width, layers, tensor, pipe, gpus, batch;
  };
  const Row rows[] = {{"1.7B", 24, 2304, 24, 1, 1, 32, 512},
                      {"3.6B", 32, 3072, 30, 2, 1, 64, 512},
                      {"7.5B", 32, 4096, 36, 4, 1, 128, 512},
                      {"18.4B", 48, 6144, 40, 8, 1, 256, 1024},
                      {"39.1B", 64, 8192, 48, 8, 2, 512, 1536},
                      {"76.1B", 80, 10240, 60, 8, 4, 1024, 1792},
                      {"145.6B", 96, 12288, 80, 8, 8, 1536, 2304},
                      {"310.1B", 128, 16384, 96, 8, 16, 1920, 2160},
                      {"529.6B", 128, 20480, 105, 8, 35, 2520, 2520},
                      {"1008.0B", 160, 25600, 128, 8, 64, 3072, 3072}};
  for (const Row& r : rows) {
    const int data = r.gpus / (r.tensor * r.pipe);
    std::string mesh = "data=" + std::to_string(data);
    if (r.tensor > 1) mesh += ",model=" + std::to_string(r.tensor);
    if (r.pipe > 1) mesh = "pipe=" + std::to_string(r.pipe) + "," + mesh;
    nlohmann::json j = {{"model", "gpt"},
                        {"n_layer", r.layers},
                        {"n_head", r.heads},
                        {"d_model", r.width},
                        {"context", 2048},
                        {"vocab", 51200},
                        {"batch", r.batch},
                        {"precision", "bf16"},
                        {"mesh", mesh},
                        {"recompute", "blocks"},
                        {"attention", "unfused"},  // Megatron-LM's in 2021
                        {"microbatches", r.batch / data}};
    if (r.tensor > 1) j["layout"] = "batch=data,heads=model,hidden=model,vocab=model,seq=model";
    TrainConfig c = TrainConfig::from_json(j);
    c.validate(/*with_data=*/false);
    SCOPED_TRACE(r.params);
    const int64_t device = expect_fits_80gib(c, /*near_formula=*/true);
    std::printf("Megatron Table 1, %s: %s, device %.1f GiB\n", r.params, mesh.c_str(),
                static_cast<double>(device) / kGiB);
  }
}

// The ZeRO paper's worked example (Rajbhandari et al., 2020, section 5):
// a 7.5B-parameter model's states take 16 bytes a parameter, 120 GB, before
// any sharding. Tessel's GPT at Megatron's 7.5B shape (36 blocks of width
// 4096, vocab 51200: 7.47B parameters), f32, on data=32: 16 bytes a
// parameter under ZeRO 0, 4 + 12/N under ZeRO 1 and 2 (the moments and
// gradients sharded, the f32 weights not), 16/N under ZeRO 3
// (docs/memory.md). On the paper's 64 ranks the moments are 8/N at every
// stage (flat chunks); the attention output projection, which leads with
// its 32 heads, keeps its gradient whole (and at stage 3 its weights).
TEST(MemoryAtScale, ZeroPapersModelStatesFor7_5bParameters) {
  nlohmann::json j = {{"model", "gpt"},       {"n_layer", 36},      {"n_head", 32},
                      {"d_model", 4096},      {"context", 2048},    {"vocab", 51200},
                      {"batch", 64},          {"precision", "f32"}, {"mesh", "data=32"},
                      {"recompute", "blocks"}};
  const int n = 32;
  int64_t psi = 0;
  for (int zero : {0, 1, 2, 3}) {
    j["zero"] = zero;
    TrainConfig c = TrainConfig::from_json(j);
    c.validate(/*with_data=*/false);
    const Mesh mesh = Mesh::parse(c.mesh);
    const RankMemory m =
        predict_rank_memory(compile_rank(c, mesh, layout_for(c, mesh), 0, CompileMode::kPlanOnly));
    if (zero == 0) {
      psi = m.parameters / 4;
      EXPECT_NEAR(16.0 * psi / 1e9, 120.0, 1.2);  // the paper's 120 GB
    }
    const int64_t shards = zero == 0 ? 1 : n;
    EXPECT_EQ(m.parameters, zero == 3 ? 4 * psi / n : 4 * psi) << "zero " << zero;
    EXPECT_EQ(m.optimizer, 8 * psi / shards) << "zero " << zero;
    EXPECT_EQ(m.gradients, 4 * psi / shards) << "zero " << zero;
  }
  j["mesh"] = "data=64";
  j["batch"] = 128;
  for (int zero : {1, 2, 3}) {
    j["zero"] = zero;
    TrainConfig c = TrainConfig::from_json(j);
    c.validate(/*with_data=*/false);
    const Mesh mesh = Mesh::parse(c.mesh);
    const RankMemory m =
        predict_rank_memory(compile_rank(c, mesh, layout_for(c, mesh), 0, CompileMode::kPlanOnly));
    EXPECT_EQ(m.optimizer, 8 * psi / 64) << "zero " << zero;
    // Whole on every rank: the parameters that lead with the 32 heads (the
    // output projection wo and the biases bq and bv of every block).
    const int64_t heads_first = 36 * (int64_t{4096} * 4096 + 2 * 4096);
    const int64_t sharded = 4 * (psi - heads_first) / 64 + 4 * heads_first;
    EXPECT_EQ(m.gradients, sharded) << "zero " << zero;
    EXPECT_EQ(m.parameters, zero == 3 ? sharded : 4 * psi) << "zero " << zero;
  }
}

}  // namespace
}  // namespace tessel
