// Published runs as planner inputs (plan/published_run.h): every file of
// examples/published/ reads, its knobs as stated; a block that contradicts
// itself or its model is refused naming the key; and the FLOP count that
// turns a published throughput into a step time reproduces the training
// times Narayanan et al. derive from it (SC21, section 5.1: GPT-3 175B on
// 1,024 GPUs at 140 TFLOP/s trains on 300B tokens in about 34 days; the 1T
// model on 3,072 GPUs at 163 TFLOP/s on 450B tokens in about 84 days).
#include "tessel/plan/published_run.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/error_of.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;

std::string published(const std::string& name) {
  return std::string(TESSEL_SOURCE_DIR) + "/examples/published/" + name;
}

struct Read {
  TrainConfig model;
  PublishedRun run;
};

Read read(const std::string& path) {
  const ConfigFile f = read_config_file(path);
  EXPECT_TRUE(f.published.has_value()) << path;
  EXPECT_FALSE(f.keys.contains("published"));
  Read r{TrainConfig::from_json(f.keys), {}};
  r.run = parse_published(*f.published, r.model, path);
  return r;
}

TEST(PublishedRun, EveryExampleReadsWithItsStatedKnobs) {
  int files = 0;
  for (const auto& entry :
       fs::directory_iterator(std::string(TESSEL_SOURCE_DIR) + "/examples/published")) {
    const Read r = read(entry.path().string());
    ++files;
    EXPECT_EQ(r.run.pipe * r.run.data * r.run.model * r.run.ctx, r.run.gpus) << entry.path();
    EXPECT_TRUE(fs::exists(r.run.cluster)) << r.run.cluster;
    EXPECT_GT(r.run.tflops_per_gpu, 0) << entry.path();
    EXPECT_EQ(r.model.precision, "bf16") << entry.path();
  }
  EXPECT_GE(files, 5);
  const Read gpt3 = read(published("megatron-gpt3-175b-1024-a100.json"));
  EXPECT_EQ(gpt3.run.mesh, "pipe=8,data=16,model=8");
  EXPECT_EQ(gpt3.run.microbatches, 96);  // 1536 / 16 sequences, micro-batch size 1
  EXPECT_EQ(gpt3.run.schedule, "interleaved");
  EXPECT_EQ(gpt3.run.zero, 0);
  EXPECT_EQ(gpt3.run.recompute, "blocks");
  EXPECT_FALSE(gpt3.run.layout.has_value());  // not stated: searched
  EXPECT_TRUE(gpt3.run.flops_with_recompute);
  EXPECT_FALSE(gpt3.run.data_parallel_overlap);
  // Llama 3 states no micro-batch count nor chunks; it states FSDP sharding
  // gradients and optimizer state (ZeRO 2), no activation checkpointing at
  // 8K, and FSDP's asynchronous prefetch and reduce (section 3.3.2).
  const Read llama = read(published("llama3-405b-16k-h100.json"));
  EXPECT_FALSE(llama.run.microbatches.has_value());
  EXPECT_FALSE(llama.run.chunks.has_value());
  EXPECT_EQ(llama.run.zero, 2);
  EXPECT_EQ(llama.run.recompute, "none");
  EXPECT_TRUE(llama.run.data_parallel_overlap);
  EXPECT_EQ(llama.model.tp_comm_precision, "bf16");
  EXPECT_FALSE(llama.run.flops_with_recompute);
  // torchtitan's context-parallel run: a ctx axis, seq on it, by ring.
  const Read cp = read(published("llama3.1-8b-256k-cp8-8-h100.json"));
  EXPECT_EQ(cp.run.mesh, "ctx=8");
  EXPECT_EQ(cp.run.layout, "seq=ctx");
  EXPECT_EQ(cp.model.context_parallel, "ring");
}

// Llama's block in the count: Llama 3.1 8B's matmul weights (blocks and the
// untied embedding and head) are its published 8.03B parameters less the
// norms; torchtitan's throughput in tokens/s is the step time directly.
TEST(PublishedRun, LlamaCountsItsOwnBlockAndThroughputInTokens) {
  const Read r = read(published("llama3.1-8b-8-h100.json"));
  const double h = static_cast<double>(r.model.d_model);
  const double weights = static_cast<double>(r.model.n_layer) * block_matmul_weights(r.model) +
                         2 * static_cast<double>(r.model.vocab) * h;
  EXPECT_NEAR(weights / 1e9, 8.03, 0.005);
  const double tokens = 16.0 * 8192;
  EXPECT_NEAR(published_step_seconds(r.run, r.model), tokens / (5762.0 * 8), 1e-9);
  // The GPT's block is Narayanan's 12 h^2.
  const Read gpt3 = read(published("megatron-gpt3-175b-1024-a100.json"));
  EXPECT_EQ(block_matmul_weights(gpt3.model), 12.0 * 12288 * 12288);
}

TEST(PublishedRun, StepTimesGiveThePapersTrainingTimes) {
  const Read gpt3 = read(published("megatron-gpt3-175b-1024-a100.json"));
  const double step = published_step_seconds(gpt3.run, gpt3.model);
  const double tokens_per_step = static_cast<double>(gpt3.model.batch * gpt3.model.context);
  EXPECT_NEAR(300e9 / tokens_per_step * step / 86400, 34, 1);
  const Read t = read(published("megatron-1t-3072-a100.json"));
  const double t_step = published_step_seconds(t.run, t.model);
  EXPECT_NEAR(450e9 / static_cast<double>(t.model.batch * t.model.context) * t_step / 86400, 84,
              1.5);
  // Without the recomputed forward the same run counts 3/4 of the blocks' FLOPs.
  const double ratio =
      narayanan_step_flops(gpt3.model, false) / narayanan_step_flops(gpt3.model, true);
  EXPECT_GT(ratio, 0.74);
  EXPECT_LT(ratio, 0.76);
}

TEST(PublishedRun, ABlockThatContradictsItselfIsRefusedNamingTheKey) {
  const Read good = read(published("megatron-gpt3-175b-1024-a100.json"));
  const nlohmann::json block =
      *read_config_file(published("megatron-gpt3-175b-1024-a100.json")).published;
  auto error_with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json b = block;
    b[key] = value;
    return error_of([&] { parse_published(b, good.model, "x.json"); });
  };
  EXPECT_NE(error_with("gpus", 512).find("'published.mesh' has 1024 ranks"), std::string::npos);
  EXPECT_NE(error_with("microbatches", 48).find("'published.microbatches'"), std::string::npos);
  EXPECT_NE(error_with("mesh", {{"pipe", 8}, {"data", 16}, {"modle", 8}})
                .find("'published.mesh."
                      "modle'"),
            std::string::npos);
  EXPECT_NE(error_with("tflops", 1).find("unknown key 'published.tflops'"), std::string::npos);
  EXPECT_NE(error_with("flops_counted", "all").find("'published.flops_counted'"),
            std::string::npos);
  EXPECT_NE(error_with("cluster", "examples/clusters/none.json").find("give --cluster"),
            std::string::npos);
  EXPECT_NE(error_with("data_parallel_overlap", "yes")
                .find("'published.data_parallel_overlap' must be true or false"),
            std::string::npos);
  nlohmann::json no_throughput = block;
  no_throughput.erase("tflops_per_gpu");
  const PublishedRun r = parse_published(no_throughput, good.model, "x.json");
  EXPECT_NE(error_of([&] { published_step_seconds(r, good.model); }).find("tflops_per_gpu"),
            std::string::npos);
}

TEST(PublishedRun, TrainRefusesTheBlockNamingWhatReadsIt) {
  const std::string e =
      error_of([&] { TrainConfig::from_file(published("megatron-gpt3-175b-1024-a100.json")); });
  EXPECT_NE(e.find("key 'published'"), std::string::npos) << e;
  EXPECT_NE(e.find("tessel plan --config"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessel::plan
