// `recompute: auto`: a candidate's cost is the forward FLOPs of what it
// recomputes; auto picks, on one rank or a pipeline, the candidate with the
// fewest recomputed FLOPs whose static plan fits the budget (checked
// against every candidate's own prediction), none when the budget is
// generous, and fails with the breakdown when nothing fits. All offline:
// predict_memory needs no data, MPI or allocation.
#include "tessel/compile/recompute_choice.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/passes/block_label.h"

namespace tessel {
namespace {

TrainConfig tiny_gpt() { return tiny_gpt_config(3, 8); }

int64_t worst_total(const TrainConfig& c) {
  int64_t worst = 0;
  for (const RankMemory& m : predict_memory(c)) worst = std::max(worst, m.total());
  return worst;
}

// The cost of a candidate is the forward FLOPs of the nodes it clones:
// every block node for `blocks` (and any grouping of them), the values with
// seq and kseq dims, the norms' and the MLP activation's outputs for
// `selective`, nothing for `none`.
TEST(RecomputeChoice, CostsAreTheRecomputedForwardFlops) {
  TrainConfig c = tiny_gpt();
  c.attention = "unfused";  // selective's attention core is its stored probabilities
  TrainingGraph stored = build_training_graph(c, c.batch);
  double block_flops = 0, attention_flops = 0, activation_flops = 0;
  for (ValueId id = 0; id <= stored.outputs.loss; ++id) {
    const Node& n = stored.graph.node(id);
    if (n.kind == OpKind::kInput || n.kind == OpKind::kParam || block_of_label(n.name) < 0)
      continue;
    block_flops += stored.graph.node_flops(id);
    if (n.shape.has("seq") && n.shape.has("kseq")) attention_flops += stored.graph.node_flops(id);
    if (n.kind == OpKind::kBiasGelu || n.kind == OpKind::kLayerNorm)
      activation_flops += stored.graph.node_flops(id);
  }
  ASSERT_GT(attention_flops, 0);
  ASSERT_GT(activation_flops, 0);
  std::map<std::string, double> cost, fused_cost;
  std::vector<RecomputeCandidate> all = recompute_candidates(c);
  for (const RecomputeCandidate& k : all)
    (k.fused_loss ? fused_cost : cost)[k.spec] = k.recomputed_flops;
  // none, selective, blocks:1:J(+selective), blocks:K; each also with the loss fused
  EXPECT_EQ(all.size(), 2 * (2u + 2 * 2 + 3));
  EXPECT_EQ(cost.at("none"), 0);
  // The fused loss recomputes the LM head's product: its forward FLOPs.
  double head_flops = 0;
  for (ValueId id = 0; id <= stored.outputs.loss; ++id)
    if (stored.graph.node(id).name == "lm_head") head_flops = stored.graph.node_flops(id);
  ASSERT_GT(head_flops, 0);
  for (const auto& [spec, flops] : cost)
    EXPECT_DOUBLE_EQ(fused_cost.at(spec), flops + head_flops) << spec;
  EXPECT_DOUBLE_EQ(cost.at("selective"), attention_flops + activation_flops);
  for (const char* spec : {"blocks", "blocks:2", "blocks:3"})
    EXPECT_DOUBLE_EQ(cost.at(spec), block_flops) << spec;
  EXPECT_LT(cost.at("blocks:1:1"), cost.at("blocks:1:2"));
  EXPECT_LT(cost.at("blocks:1:1"), cost.at("blocks:1:1+selective"));
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_LE(all[i - 1].recomputed_flops, all[i].recomputed_flops) << "cost order at " << i;
}

// Fused attention stores no (seq, kseq) values: its `selective` recomputes
// the norms' and the MLP activation's outputs alone, the cheapest candidate
// that recomputes anything.
TEST(RecomputeChoice, FusedAttentionsSelectiveRecomputesNormsAndActivationsAlone) {
  const TrainConfig c = tiny_gpt();
  ASSERT_EQ(c.attention, "fused");
  const TrainingGraph stored = build_training_graph(c, c.batch);
  double activation_flops = 0;
  for (ValueId id = 0; id <= stored.outputs.loss; ++id) {
    const Node& n = stored.graph.node(id);
    if ((n.kind == OpKind::kBiasGelu || n.kind == OpKind::kLayerNorm) &&
        block_of_label(n.name) >= 0)
      activation_flops += stored.graph.node_flops(id);
  }
  ASSERT_GT(activation_flops, 0);
  const std::vector<RecomputeCandidate> all = recompute_candidates(c);
  ASSERT_EQ(all.size(), 18u);
  const auto selective = std::find_if(all.begin(), all.end(), [](const RecomputeCandidate& k) {
    return k.spec == "selective" && !k.fused_loss;
  });
  ASSERT_NE(selective, all.end());
  EXPECT_DOUBLE_EQ(selective->recomputed_flops, activation_flops);
  // Nothing that recomputes is cheaper (the fused loss alone may be cheaper still).
  for (const RecomputeCandidate& k : all) {
    if (k.fused_loss || k.spec == "none") continue;
    EXPECT_LE(selective->recomputed_flops, k.recomputed_flops) << k.spec;
  }
}

// For every budget that exactly fits some candidate: the choice fits, and no
// candidate that recomputes fewer FLOPs fits (each judged on its own plan).
void expect_cheapest_that_fits(TrainConfig c) {
  std::vector<RecomputeCandidate> all = recompute_candidates(c);
  std::map<std::string, int64_t> memory;
  for (const RecomputeCandidate& k : all) {
    TrainConfig alt = c;
    alt.recompute = k.spec;
    if (k.fused_loss) alt.loss = "fused";
    memory[k.name()] = worst_total(alt);
  }
  EXPECT_LT(memory.at("blocks"), memory.at("none"));
  for (const auto& [budget_of, limit] : memory) {
    c.memory_limit = std::to_string(limit);
    c.recompute = "auto";
    RecomputeChoice choice = choose_recompute(c);
    const RecomputeCandidate& chosen = choice.chosen_candidate();
    ASSERT_TRUE(chosen.memory.has_value()) << choice.report();
    EXPECT_EQ(*chosen.memory, memory.at(chosen.name())) << choice.report();
    EXPECT_LE(*chosen.memory, limit) << choice.report();
    for (const RecomputeCandidate& k : all) {
      if (memory.at(k.name()) > limit) continue;
      EXPECT_LE(chosen.recomputed_flops, k.recomputed_flops)
          << "budget " << limit << ": " << k.name() << " fits and recomputes less than "
          << chosen.name() << "\n"
          << choice.report();
    }
  }
}

TEST(RecomputeChoice, PicksTheFewestRecomputedFlopsThatFit) {
  expect_cheapest_that_fits(tiny_gpt());
}

TEST(RecomputeChoice, PicksTheFewestRecomputedFlopsThatFitOnAPipeline) {
  TrainConfig c = tiny_gpt();
  c.mesh = "pipe=2";
  c.microbatches = 2;
  expect_cheapest_that_fits(c);
}

TEST(RecomputeChoice, GenerousBudgetKeepsEverythingStored) {
  TrainConfig c = tiny_gpt();
  c.recompute = "auto";
  c.memory_limit = "1GiB";
  RecomputeChoice choice = choose_recompute(c);
  EXPECT_EQ(choice.chosen_candidate().name(), "none");
  EXPECT_NE(choice.report().find("recompute auto: chose none"), std::string::npos)
      << choice.report();
}

TEST(RecomputeChoice, NothingFitsFailsWithTheBreakdown) {
  TrainConfig c = tiny_gpt();
  c.recompute = "auto";
  c.memory_limit = "64KiB";
  const std::string e = error_of([&] { choose_recompute(c); });
  for (const char* part : {"no recomputation fits the memory limit of 0.06 MiB", "training arena",
                           "blocks", "blocks:1:1", "over the limit"})
    EXPECT_NE(e.find(part), std::string::npos) << part << " in: " << e;
}

// With a large vocabulary the logits decide what fits: a budget below the
// unfused plan storing everything but above the fused loss's is met by
// `loss: fused` with nothing else recomputed (the LM head's product is
// cheaper to redo than the blocks), and train applies it (resolve_recompute).
TEST(RecomputeChoice, ALargeVocabularyFitsByFusingTheLoss) {
  TrainConfig c = tiny_gpt();
  c.vocab = 8192;
  c.data = "synthetic";
  c.context = 64;
  c.batch = 16;
  TrainConfig fused = c;
  fused.loss = "fused";
  ASSERT_LT(worst_total(fused), worst_total(c));
  c.recompute = "auto";
  c.memory_limit = std::to_string(worst_total(fused));
  const RecomputeChoice choice = choose_recompute(c);
  EXPECT_EQ(choice.chosen_candidate().name(), "none + loss fused") << choice.report();
  EXPECT_NE(choice.report().find("chose none + loss fused"), std::string::npos) << choice.report();
  TrainConfig resolved = c;
  resolve_recompute(resolved);
  EXPECT_EQ(resolved.recompute, "none");
  EXPECT_EQ(resolved.loss, "fused");
}

}  // namespace
}  // namespace tessel
