// Recompute policies (the `recompute` key): every spelling parses and prints
// back canonically, bad spellings and block counts the model lacks are
// errors naming the key, and a policy's segments are the ones its spelling
// promises.
#include "tessel/passes/recompute_policy.h"

#include <gtest/gtest.h>

#include <set>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/config.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"

namespace tessel {
namespace {

TrainConfig tiny_gpt() { return tiny_gpt_config(3, 8); }

TEST(RecomputePolicy, SpellingsRoundTripAndBadOnesNameTheKey) {
  for (const char* spec :
       {"none", "selective", "blocks", "blocks:2", "blocks:1:3", "blocks:2:4+selective"})
    EXPECT_EQ(RecomputePolicy::parse(spec).to_string(), spec);
  EXPECT_EQ(RecomputePolicy::parse("blocks:1").to_string(), "blocks");
  EXPECT_EQ(RecomputePolicy::parse("selective+blocks:1:2").to_string(), "blocks:1:2+selective");
  for (const char* bad : {"block", "blocks:0", "blocks:x", "blocks:1:2:3", "selective+selective",
                          "blocks+blocks:2", "blocks:1:"})
    EXPECT_NE(error_of([&] { RecomputePolicy::parse(bad); }).find("'recompute'"), std::string::npos)
        << bad;
  TrainConfig c = tiny_gpt();
  c.recompute = "blocks:1:4";
  EXPECT_NE(error_of([&] { c.validate(); }).find("the model has 3 ('n_layer')"), std::string::npos);
  c.recompute = "auto";
  EXPECT_NE(error_of([&] { c.validate(); }).find("needs 'memory_limit'"), std::string::npos);
}

// Segments by label and shape: groups of K blocks up to block J, then the
// values with seq and kseq dims (the attention core) where selective.
TEST(RecomputePolicy, SegmentsFollowTheSpelling) {
  auto node = [](const std::string& label, Shape shape) {
    Node n;
    n.kind = OpKind::kSoftmax;
    n.name = label;
    n.shape = std::move(shape);
    return n;
  };
  const Shape scores{{"batch", 2}, {"heads", 2}, {"seq", 4}, {"kseq", 4}};
  const Shape q{{"batch", 2}, {"seq", 4}, {"heads", 2}, {"head", 8}};
  const Graph g;
  const SegmentFn s = RecomputePolicy::parse("blocks:2:4+selective").segments();
  EXPECT_EQ(s(g, node("block0.attn.q", q)), "blocks0");
  EXPECT_EQ(s(g, node("block1.mlp.fc", q)), "blocks0");
  EXPECT_EQ(s(g, node("block3.attn.probs", scores)), "blocks2");
  EXPECT_EQ(s(g, node("block4.attn.probs", scores)), "block4.attention");
  EXPECT_EQ(s(g, node("block4.attn.q", q)), "");
  EXPECT_EQ(s(g, node("lm_head", q)), "");
  const SegmentFn none = RecomputePolicy::parse("none").segments();
  EXPECT_EQ(none(g, node("block0.attn.probs", scores)), "");
}

// `selective` on the fused GPT and Llama (no attention core stored)
// recomputes exactly the norms' and the MLP's activation outputs: GELU's,
// and SwiGLU's silu and the product it gates; each from stored inputs.
TEST(RecomputePolicy, SelectiveRecomputesTheNormAndActivationOutputs) {
  for (const char* model : {"gpt", "llama"}) {
    TrainConfig c = tiny_gpt();
    c.model = model;
    const TrainingGraph t = build_training_graph(c, c.batch);
    const RecomputeResult r = recompute_segments(t.graph, t.outputs.loss + 1,
                                                 RecomputePolicy::parse("selective").segments());
    std::multiset<std::string> recomputed;
    for (ValueId id : r.clones) recomputed.insert(r.graph.node(id).name);
    std::multiset<std::string> want;
    for (int b = 0; b < c.n_layer; ++b) {
      const std::string block = block_scope(b);
      for (const char* v :
           c.model == "llama"
               ? std::vector<const char*>{".attn_norm.rmsnorm", ".mlp_norm.rmsnorm", ".mlp.act",
                                          ".mlp.gated"}
               : std::vector<const char*>{".ln1.layernorm", ".ln2.layernorm", ".mlp.act"})
        want.insert(block + v);
    }
    EXPECT_EQ(recomputed, want) << model;
  }
}

}  // namespace
}  // namespace tessel
