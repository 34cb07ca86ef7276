// The Llama-family model (models/llama.h): Llama's SwiGLU hidden-size rule
// and parameter count at the published sizes, grouped-query attention's
// shapes, the config's checks, and a short training run on the fortunes
// text whose loss falls well below the unigram entropy. Its layout
// invariance runs under mpirun in tests/layout/llama_layout_test.cc.
#include "tessel/models/llama.h"

#include <gtest/gtest.h>

#include <cmath>

#include "common/error_of.h"
#include "tessel/compile/model_registry.h"
#include "tessel/ir/graph.h"
#include "tessel/train/trainer.h"

namespace tessel {
namespace {

LlamaConfig published(int64_t layers, int64_t heads, int64_t kv, int64_t dim, double multiplier,
                      int64_t multiple_of, int64_t vocab) {
  LlamaConfig c;
  c.n_layer = layers, c.n_head = heads, c.n_kv_head = kv, c.d_model = dim;
  c.ffn_dim_multiplier = multiplier, c.multiple_of = multiple_of, c.vocab = vocab;
  c.context = 8;
  return c;
}

int64_t parameter_count(const LlamaConfig& c) {
  Graph g;
  GraphBuilder b(g);
  build_llama(b, c, 1);
  int64_t n = 0;
  for (ValueId p : g.params()) n += g.node(p).shape.numel();
  return n;
}

// Meta's published hidden sizes (params.json of each release).
TEST(Llama, HiddenSizeRuleGivesThePublishedSizes) {
  EXPECT_EQ(llama_hidden_size(published(32, 32, 32, 4096, 0, 256, 32000)), 11008);     // Llama 2 7B
  EXPECT_EQ(llama_hidden_size(published(32, 32, 8, 4096, 1.3, 1024, 128256)), 14336);  // 3 8B
  EXPECT_EQ(llama_hidden_size(published(80, 64, 8, 8192, 1.3, 4096, 128256)), 28672);  // 3 70B
  EXPECT_EQ(llama_hidden_size(published(126, 128, 8, 16384, 1.2, 4096, 128256)), 53248);  // 405B
}

// Llama 3 8B has 8,030,261,248 parameters (Hugging Face's count of
// Meta-Llama-3-8B): untied 128256 x 4096 embedding and head, 8 key/value
// heads, no biases.
TEST(Llama, Llama3EightBHasThePublishedParameterCount) {
  EXPECT_EQ(parameter_count(published(32, 32, 8, 4096, 1.3, 1024, 128256)), 8030261248);
}

// The shape of the node named `name`, or "" when there is none.
std::string shape_of(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.name == name) return n.shape.to_string();
  return "";
}

TEST(Llama, GroupedQueryAttentionPairsQueryGroupsWithTheirKeyHead) {
  Graph g;
  GraphBuilder b(g);
  LlamaConfig c = published(1, 8, 2, 64, 0, 32, 256);
  build_llama(b, c, 3);
  EXPECT_EQ(g.node(g.find("block0.attn.wq")).shape.to_string(),
            "(embed=64, kv_heads=2, group=4, head=8)");
  EXPECT_EQ(g.node(g.find("block0.attn.wk")).shape.to_string(), "(embed=64, kv_heads=2, head=8)");
  EXPECT_EQ(g.node(g.find("output")).shape.to_string(), "(embed=64, vocab=256)");
  // Fused (the default): keys expanded over the query group feed one op.
  EXPECT_EQ(shape_of(g, "block0.attn.k_per_query"),
            "(batch=3, kseq=8, kv_heads=2, group=4, head=8)");
  EXPECT_EQ(shape_of(g, "block0.attn.scores"), "");
  // Unfused: the scores einsum pairs each group with its key head by name.
  Graph unfused;
  GraphBuilder ub(unfused);
  c.fused_attention = false;
  build_llama(ub, c, 3);
  EXPECT_EQ(shape_of(unfused, "block0.attn.scores"),
            "(batch=3, kv_heads=2, group=4, seq=8, kseq=8)");
}

TrainConfig small_llama() {
  TrainConfig c;
  c.model = "llama";
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.d_model = 64;
  c.multiple_of = 32;
  c.context = 32;
  c.batch = 16;
  c.steps = 200;
  c.lr = 3e-3;
  c.min_lr = 3e-4;
  c.warmup_steps = 10;
  c.eval_batches = 8;
  c.threads = 2;
  return c;
}

TEST(Llama, ConfigErrorsNameTheKeys) {
  TrainConfig c = small_llama();
  c.n_kv_head = 3;
  EXPECT_NE(error_of([&] { c.validate(); }).find("'n_kv_head' (3) must divide 'n_head' (4)"),
            std::string::npos);
  c = small_llama();
  c.n_head = 64;  // head dim 1
  EXPECT_NE(error_of([&] { c.validate(); }).find("must be even"), std::string::npos);
  c = small_llama();
  c.dropout = 0.1;
  EXPECT_NE(error_of([&] { c.validate(); }).find("has no dropout"), std::string::npos);
  c = small_llama();
  c.attention_dropout = 0.1;
  EXPECT_NE(error_of([&] { c.validate(); }).find("'attention_dropout' must be 0"),
            std::string::npos);
  c = small_llama();
  c.model = "gpt";
  c.attention_dropout = 1;
  EXPECT_NE(error_of([&] { c.validate(); }).find("'attention_dropout' must be in [0, 1), got 1"),
            std::string::npos);
  c = small_llama();
  c.rope_theta = 1;
  EXPECT_NE(error_of([&] { c.validate(); }).find("'rope_theta'"), std::string::npos);
  c = small_llama();
  c.rope_scaling = {{"factor", 8}, {"low_freq_factr", 1}};
  EXPECT_NE(error_of([&] { c.validate(); }).find("has no key 'low_freq_factr'"), std::string::npos);
  c.rope_scaling = {{"low_freq_factor", 1}};
  EXPECT_NE(error_of([&] { c.validate(); }).find("needs 'factor'"), std::string::npos);
  c.rope_scaling = {{"factor", 8}, {"low_freq_factor", 4}, {"high_freq_factor", 1}};
  EXPECT_NE(error_of([&] { c.validate(); }).find("0 < low_freq_factor < high_freq_factor"),
            std::string::npos);
}

// Llama 3.1's rope_scaling reaches both rotary ops of every block.
TEST(Llama, RopeScalingReachesTheRotaryOps) {
  TrainConfig c = small_llama();
  c.rope_scaling = {{"rope_type", "llama3"},
                    {"factor", 8},
                    {"low_freq_factor", 1},
                    {"high_freq_factor", 4},
                    {"original_max_position_embeddings", 8192}};
  c.validate();
  Graph g;
  GraphBuilder b(g);
  build_model(c, b, 2, /*training=*/true);
  int rotary = 0;
  for (const Node& n : g.nodes())
    if (n.kind == OpKind::kRotary) {
      ++rotary;
      EXPECT_EQ(n.attrs.key, "llama3 8 1 4 8192") << n.name;
    }
  EXPECT_EQ(rotary, 2 * c.n_layer);
}

// Trains on the fortunes text; a model that only learnt byte frequencies
// would sit at the unigram entropy.
// The fused attention op (with keys expanded over the group) trains as the
// einsum-softmax-einsum path does: its kernel differs only in summation
// order (1e-6 relative per op, docs/attention.md).
TEST(Llama, FusedAttentionTrainsAsUnfused) {
  TrainConfig c = small_llama();
  c.steps = 3;
  TrainConfig u = c;
  u.attention = "unfused";
  Trainer fused(c), unfused(u);
  for (int s = 0; s < 3; ++s) {
    const double a = fused.step().loss, b = unfused.step().loss;
    EXPECT_NEAR(a, b, 1e-5 * std::abs(b)) << "step " << s;
  }
}

TEST(Llama, SmallLlamaLossFallsBelowTheUnigramEntropy) {
  TrainConfig c = small_llama();
  Trainer trainer(c);
  const double first = trainer.step().loss;
  for (int64_t s = 1; s < c.steps; ++s) trainer.step();
  EvalResult val = trainer.evaluate();
  const double entropy = trainer.task().baseline_loss();
  EXPECT_GT(first, std::log(256.0) - 0.1) << "the published init starts near uniform";
  EXPECT_LT(val.loss, entropy - 0.35) << "val loss " << val.loss << ", unigram entropy " << entropy;
}

}  // namespace
}  // namespace tessel
