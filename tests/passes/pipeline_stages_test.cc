// The pipeline partition and stage graphs (passes/pipeline_stages.h) on the
// GPT, without running: balance, boundaries, the values that cross stages,
// tied parameters, the three backward phases, and the errors.
#include "tessel/passes/pipeline_stages.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/ir/builder.h"
#include "tessel/train/task.h"

namespace tessel {
namespace {

struct Forward {
  Graph graph;
  ValueId loss = -1;
};

Forward gpt_forward(int64_t layers) {
  TrainConfig c = tiny_gpt_config(layers, 4);
  Forward f;
  GraphBuilder b(f.graph);
  f.loss = build_model(c, b, c.batch, /*training=*/true).loss;
  return f;
}

TEST(PipelineStages, BalancedPartitionMinimisesTheSlowestStage) {
  Forward f = gpt_forward(6);
  StagePartition p = partition_stages(f.graph, 3);
  ASSERT_EQ(p.first_block.size(), 3u);
  EXPECT_EQ(p.first_block[0], 0);
  const double chosen = *std::max_element(p.predicted_seconds.begin(), p.predicted_seconds.end());
  // Every other contiguous split has a slowest stage at least as slow.
  for (int a = 1; a < 6; ++a)
    for (int b = a + 1; b < 6; ++b) {
      StagePartition q = partition_stages(f.graph, 3, {a, b});
      double slowest = *std::max_element(q.predicted_seconds.begin(), q.predicted_seconds.end());
      EXPECT_LE(chosen, slowest * (1 + 1e-12)) << "split at " << a << "," << b;
    }
  // Every forward op is on some stage; embeddings first, the loss last.
  for (ValueId id = 0; id < f.graph.size(); ++id) {
    OpKind k = f.graph.node(id).kind;
    if (k == OpKind::kInput || k == OpKind::kParam) continue;
    EXPECT_GE(p.stage_of_node[id], 0) << f.graph.node(id).name;
  }
  EXPECT_EQ(p.stage_of_node[f.loss], 2);
}

TEST(PipelineStages, StageGraphsExchangeTheResidualStreamAndShareTheTiedEmbedding) {
  Forward f = gpt_forward(4);
  StagePartition p = partition_stages(f.graph, 2, {2});
  std::vector<StageGraph> stages =
      build_stage_graphs(f.graph, f.loss, p, {true, 4, "", /*split_weight_phase=*/true});
  ASSERT_EQ(stages.size(), 2u);
  const StageGraph& first = stages[0];
  const StageGraph& last = stages[1];
  // One activation crosses, as a "pipe.act" input of the last stage with
  // the same shape; its gradient comes back.
  ASSERT_EQ(first.activations_out.size(), 1u);
  ASSERT_EQ(last.activations_in.size(), 1u);
  EXPECT_EQ(last.graph.node(last.activations_in[0]).name, first.out_names[0]);
  EXPECT_EQ(first.graph.node(first.activations_out[0]).shape,
            last.graph.node(last.activations_in[0]).shape);
  ASSERT_EQ(first.gradients_in.size(), 1u);
  ASSERT_EQ(last.gradients_out.size(), 1u);
  EXPECT_TRUE(first.activations_in.empty());
  EXPECT_TRUE(last.activations_out.empty());
  EXPECT_TRUE(last.loss.has_value());
  EXPECT_FALSE(first.loss.has_value());
  // The token embedding is read by both (embedding and tied head).
  EXPECT_GE(first.graph.find("wte"), 0);
  EXPECT_GE(last.graph.find("wte"), 0);
  EXPECT_LT(last.graph.find("wpe"), 0);
  EXPECT_LT(first.graph.find("ln_f.gamma"), 0);
  // One gradient per parameter; phases in order. The last stage sends a
  // gradient back, so its backward-input phase is not empty; the first
  // sends none, so all of its backward is backward-weight.
  for (const StageGraph& s : stages) {
    EXPECT_EQ(s.param_grads.size(), s.graph.params().size());
    EXPECT_LE(s.backward_input_begin, s.backward_weight_begin);
    EXPECT_LT(s.backward_weight_begin, s.graph.size());
  }
  EXPECT_LT(last.backward_input_begin, last.backward_weight_begin);
  EXPECT_EQ(first.backward_input_begin, first.backward_weight_begin);
  // The input gradient is computed in the backward-input phase.
  EXPECT_GE(last.gradients_out[0], last.backward_input_begin);
  EXPECT_LT(last.gradients_out[0], last.backward_weight_begin);
}

// Without a zero-bubble schedule the backward is one phase in autodiff
// order: the weight phase is empty, and a block's weight gradients come
// before the earlier block's input gradients (they die with their block).
TEST(PipelineStages, UnsplitBackwardIsOnePhaseInAutodiffOrder) {
  Forward f = gpt_forward(4);
  StagePartition p = partition_stages(f.graph, 2, {2});
  std::vector<StageGraph> split =
      build_stage_graphs(f.graph, f.loss, p, {true, 4, "", /*split_weight_phase=*/true});
  std::vector<StageGraph> stages = build_stage_graphs(f.graph, f.loss, p, {true, 4, ""});
  for (size_t k = 0; k < stages.size(); ++k) {
    const StageGraph& s = stages[k];
    EXPECT_EQ(s.backward_weight_begin, s.graph.size());
    EXPECT_EQ(s.backward_input_begin, split[k].backward_input_begin);  // the same forward
    EXPECT_EQ(s.graph.size(), split[k].graph.size());                  // the same nodes
  }
  const StageGraph& last = stages[1];
  const std::vector<ValueId>& params = last.graph.params();
  const auto at = std::find(params.begin(), params.end(), last.graph.find("block3.mlp.w2"));
  ASSERT_NE(at, params.end());
  const ValueId block3_weight = last.param_grads[at - params.begin()];
  EXPECT_GE(block3_weight, last.backward_input_begin);
  EXPECT_LT(block3_weight, last.gradients_out[0]);
}

TEST(PipelineStages, BadPartitionsAreErrors) {
  Forward f = gpt_forward(2);
  EXPECT_NE(error_of([&] {
              partition_stages(f.graph, 3);
            }).find("3 stages but the model has only 2 blocks"),
            std::string::npos);
  Forward g = gpt_forward(4);
  EXPECT_NE(error_of([&] {
              partition_stages(g.graph, 3, {2});
            }).find("lists 1 boundaries; 3 stages need 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              partition_stages(g.graph, 3, {2, 2});
            }).find("stage boundary 2 must be greater than 2"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel
