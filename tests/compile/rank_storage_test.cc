// rank_storage's staged inputs of a pipeline rank: taken from the last model
// built for an equal config (a memo keyed by the whole config), they must be
// what a fresh build of the config's model has, for every config asked.
#include "tessel/compile/rank_storage.h"

#include <gtest/gtest.h>

#include "common/tiny_gpt.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/ir/builder.h"

namespace tessel {
namespace {

// The full-batch inputs of the config's model, built afresh.
std::vector<StagedInput> built_inputs(const TrainConfig& c) {
  Graph g;
  GraphBuilder b(g);
  build_model(c, b, c.batch, /*training=*/true);
  std::vector<StagedInput> out;
  for (ValueId id : g.inputs())
    out.push_back({g.node(id).name, g.node(id).shape, g.node(id).dtype, 0, ""});
  return out;
}

void expect_inputs(const RankStorage& s, const TrainConfig& c) {
  const std::vector<StagedInput> want = built_inputs(c);
  ASSERT_EQ(s.inputs.size(), want.size());
  int64_t bytes = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(s.inputs[i].name, want[i].name);
    EXPECT_EQ(s.inputs[i].shape, want[i].shape);
    EXPECT_EQ(s.inputs[i].dtype, want[i].dtype);
    // Ids are bounded by the vocabulary (tokens: the embedding; targets: the loss).
    EXPECT_EQ(s.inputs[i].id_limit, want[i].dtype == DType::kI32 ? c.vocab : 0) << want[i].name;
    bytes += want[i].bytes();
  }
  EXPECT_EQ(s.input_staging, bytes);
  EXPECT_GT(bytes, 0);
}

TEST(RankStorage, StagedInputsFollowTheConfig) {
  TrainConfig c = tiny_gpt_config(2, 8);
  c.mesh = "pipe=2";
  c.microbatches = 2;
  const Mesh mesh = Mesh::parse(c.mesh);
  const Layout layout = layout_for(c, mesh);
  // Every rank, twice (the second time from the memo), then other batch
  // sizes and contexts, other parallel knobs, and the first config again.
  std::vector<TrainConfig> configs = {c, c};
  for (int64_t batch : {4, 16}) {
    TrainConfig other = c;
    other.batch = batch;
    configs.push_back(other);
  }
  TrainConfig longer = c;
  longer.context = 8;
  configs.push_back(longer);
  // Parallel knobs only (the memo's key leaves them out: the model's inputs
  // do not depend on them): the inputs are still the model's own.
  TrainConfig knobs = c;
  knobs.microbatches = 4;
  knobs.schedule = "gpipe";
  knobs.recompute = "blocks";
  configs.push_back(knobs);
  configs.push_back(c);
  for (const TrainConfig& config : configs)
    for (int rank = 0; rank < 2; ++rank) {
      const CompiledRank compiled =
          compile_rank(config, mesh, layout, rank, CompileMode::kPlanOnly);
      ASSERT_TRUE(compiled.pipelined());
      expect_inputs(rank_storage(compiled), config);
    }
  EXPECT_EQ(built_inputs(configs[2]).front().shape.numel() * 4,
            built_inputs(configs[3]).front().shape.numel());  // batch 4 against 16
}

}  // namespace
}  // namespace tessel
