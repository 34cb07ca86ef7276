#include "tessel/models/gpt.h"

#include <cmath>
#include <string>

#include "tessel/ir/model_contract.h"
#include "tessel/models/lm_loss.h"

namespace tessel {
namespace {

struct Dims {
  Dim batch, seq, embed, heads, head, hidden, vocab;
};

// `drop`: dropout on the probabilities (rate 0: none), one stream per block.
ValueId attention(GraphBuilder& b, const Dims& d, ValueId x, bool fused,
                  const ProbabilityDropout& drop) {
  GraphBuilder::Scope scope(b, "attn");
  const ParamInit zeros{ParamInit::kZeros};
  // The key projection has no bias: adding b to every key shifts each
  // query's scores by the constant q.b, which softmax ignores, so its true
  // gradient is exactly zero and AdamW would turn rounding noise into
  // full-size updates that differ between layouts.
  auto project = [&](const char* name, bool with_bias) {
    ValueId w = b.param(std::string("w") + name, Shape{d.embed, d.heads, d.head});
    ValueId y = b.einsum(x, w, {kBatchDim, kSeqDim, "heads", "head"}, name);
    if (!with_bias) return y;
    ValueId bias = b.param(std::string("b") + name, Shape{d.heads, d.head}, zeros);
    return b.add(y, bias, std::string(name) + "_bias");
  };
  ValueId q = project("q", true);
  ValueId k = b.rename(project("k", false), kSeqDim, kKeySeqDim);
  ValueId v = b.rename(project("v", true), kSeqDim, kKeySeqDim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head.size));
  ValueId mixed;
  if (fused) {
    mixed = b.attention(q, k, v, kSeqDim, kKeySeqDim, "head", true, scale, "core", drop).out;
  } else {
    ValueId scores = b.einsum(q, k, {kBatchDim, "heads", kSeqDim, kKeySeqDim}, "scores");
    ValueId probs = b.softmax(scores, kKeySeqDim, scale, kSeqDim, "probs");
    if (drop.p > 0.0f) probs = b.dropout(probs, drop.p, drop.seed, drop.key);
    mixed = b.einsum(probs, v, {kBatchDim, kSeqDim, "heads", "head"}, "mix");
  }
  ValueId wo = b.param("wo", Shape{d.heads, d.head, d.embed});
  ValueId bo = b.param("bo", Shape{d.embed}, zeros);
  return b.add(b.einsum(mixed, wo, {kBatchDim, kSeqDim, "embed"}, "o"), bo, "o_bias");
}

ValueId mlp(GraphBuilder& b, const Dims& d, ValueId x) {
  GraphBuilder::Scope scope(b, "mlp");
  const ParamInit zeros{ParamInit::kZeros};
  ValueId w1 = b.param("w1", Shape{d.embed, d.hidden});
  ValueId b1 = b.param("b1", Shape{d.hidden}, zeros);
  ValueId w2 = b.param("w2", Shape{d.hidden, d.embed});
  ValueId b2 = b.param("b2", Shape{d.embed}, zeros);
  ValueId h = b.bias_gelu(b.einsum(x, w1, {kBatchDim, kSeqDim, "hidden"}, "fc"), b1, "act");
  return b.add(b.einsum(h, w2, {kBatchDim, kSeqDim, "embed"}, "proj"), b2, "proj_bias");
}

ValueId layernorm(GraphBuilder& b, const Dims& d, ValueId x, const std::string& name) {
  GraphBuilder::Scope scope(b, name);
  ValueId gamma = b.param("gamma", Shape{d.embed}, ParamInit{ParamInit::kOnes});
  ValueId beta = b.param("beta", Shape{d.embed}, ParamInit{ParamInit::kZeros});
  return b.layernorm(x, gamma, beta, "embed");
}

ValueId residual_dropout(GraphBuilder& b, ValueId x, const GptConfig& c, bool training,
                         const char* key) {
  if (!training || c.dropout <= 0.0f) return x;
  return b.dropout(x, c.dropout, c.seed, key);
}

}  // namespace

TaskGraph build_gpt(GraphBuilder& b, const GptConfig& c, int64_t batch, bool training) {
  const Dims d{{kBatchDim, batch},  {kSeqDim, c.context},           {"embed", c.d_model},
               {"heads", c.n_head}, {"head", c.d_model / c.n_head}, {"hidden", 4 * c.d_model},
               {"vocab", c.vocab}};
  const ValueId tokens = b.input("tokens", Shape{d.batch, d.seq}, DType::kI32);
  const ValueId targets = b.input("targets", Shape{d.batch, d.seq}, DType::kI32);
  ValueId wte = b.param("wte", Shape{d.vocab, d.embed});
  ValueId wpe = b.param("wpe", Shape{{"pos", c.context}, d.embed});
  ValueId x = b.add(b.embedding(wte, tokens, "vocab", "tok_emb"),
                    b.rename(wpe, "pos", kSeqDim, "pos_emb"), "emb");
  x = residual_dropout(b, x, c, training, "emb_dropout");
  const ProbabilityDropout probs_dropout{training ? c.attention_dropout : 0.0f, c.seed,
                                         "probs_dropout"};
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    GraphBuilder::Scope scope(b, block_scope(static_cast<int>(layer)));
    x = b.add(x,
              residual_dropout(
                  b, attention(b, d, layernorm(b, d, x, "ln1"), c.fused_attention, probs_dropout),
                  c, training, "attn_dropout"),
              "attn_residual");
    x = b.add(x,
              residual_dropout(b, mlp(b, d, layernorm(b, d, x, "ln2")), c, training, "mlp_dropout"),
              "mlp_residual");
  }
  ValueId h = layernorm(b, d, x, "ln_f");
  return lm_loss(b, h, wte, targets, c.fused_loss);
}

}  // namespace tessel
