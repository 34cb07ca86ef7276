// Recompute policies (the `recompute` key): every spelling parses and prints
// back canonically, bad spellings and block counts the model lacks are
// errors naming the key, and a policy's segments are the ones its spelling
// promises.
#include "tessel/passes/recompute_policy.h"

#include <gtest/gtest.h>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/compile/config.h"
#include "tessel/ir/builder.h"

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
  const SegmentFn s = RecomputePolicy::parse("blocks:2:4+selective").segments();
  EXPECT_EQ(s(node("block0.attn.q", q)), "blocks0");
  EXPECT_EQ(s(node("block1.mlp.fc", q)), "blocks0");
  EXPECT_EQ(s(node("block3.attn.probs", scores)), "blocks2");
  EXPECT_EQ(s(node("block4.attn.probs", scores)), "block4.attention");
  EXPECT_EQ(s(node("block4.attn.q", q)), "");
  EXPECT_EQ(s(node("lm_head", q)), "");
  const SegmentFn none = RecomputePolicy::parse("none").segments();
  EXPECT_EQ(none(node("block0.attn.probs", scores)), "");
}

}  // namespace
}  // namespace tessel
