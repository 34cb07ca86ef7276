// `loss: fused` (one linear_cross_entropy op, docs/memory.md): the
// training graph has no logits, and the predicted arenas of the training
// and the evaluation programs each shrink by at least the logits' bytes
// (batch x context x vocab f32, the unfused plans' largest value with a
// large vocabulary) less the one chunk of them (and the per-row statistics)
// the fused op's scratch holds. Offline: predict_memory needs no data, MPI or allocation.
#include <gtest/gtest.h>

#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/kernels/linear_cross_entropy.h"

namespace tessel {
namespace {

TrainConfig large_vocab(const std::string& model) {
  TrainConfig c;
  c.model = model;
  c.n_layer = 1;
  c.n_head = 2;
  c.n_kv_head = 2;
  c.d_model = 64;
  c.multiple_of = 32;
  c.context = 256;
  c.batch = 4;
  c.vocab = 32768;
  c.data = "synthetic";
  return c;
}

TEST(FusedLoss, TheGraphHasNoLogitsAndBothArenasShrinkByTheirBytes) {
  for (const std::string model : {"gpt", "llama"}) {
    TrainConfig c = large_vocab(model);
    const RankMemory unfused = predict_memory(c).at(0);
    c.loss = "fused";
    const RankMemory fused = predict_memory(c).at(0);
    // The fused op's scratch holds one tile of logits and, in the
    // forward, four floats per row (16 KiB here): 64 KiB of slack for those
    // and the other values' placement.
    const int64_t logits = c.batch * c.context * c.vocab * 4;
    const int64_t saved = logits - static_cast<int64_t>(kernels::kLinearCeTileBytes) - 65536;
    EXPECT_GE(unfused.arena - fused.arena, saved) << model;
    EXPECT_GE(unfused.eval_arena - fused.eval_arena, saved) << model;
    const TrainingGraph t = build_training_graph(c, c.batch);
    EXPECT_FALSE(t.outputs.logits.has_value()) << model;
    for (const Node& n : t.graph.nodes())
      EXPECT_FALSE(n.shape.has("vocab") && n.shape.has("seq")) << model << ": " << n.name;
  }
}

TEST(FusedLoss, AnUnknownLossIsRefusedNamingTheChoices) {
  TrainConfig c = large_vocab("gpt");
  c.loss = "chunked";
  try {
    c.validate();
    FAIL() << "loss 'chunked' was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'loss'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fused"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel
