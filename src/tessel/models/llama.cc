#include "tessel/models/llama.h"

#include <cmath>
#include <string>

#include "tessel/ir/model_contract.h"
#include "tessel/models/lm_loss.h"

namespace tessel {
namespace {

struct LlamaDims {
  Dim batch, seq, embed, kv_heads, group, head, hidden, vocab;
};

// The published initialisation (torchtitan's Llama 3): N(0, 0.02) for the
// input projections; the output projections (wo, w2, w3) scaled down with
// depth, 0.02 / sqrt(2 (layer + 1)); the embedding N(0, 1); the LM head
// N(0, d_model^-1/2) (torchtitan truncates it at 3 std: not done here);
// norms ones.
constexpr float kInitStd = 0.02f;

ParamInit normal(float stddev) { return ParamInit{ParamInit::kNormal, stddev}; }

ValueId gqa_attention(GraphBuilder& b, const LlamaDims& d, const LlamaConfig& c, ValueId x,
                      float out_std) {
  GraphBuilder::Scope scope(b, "attn");
  const std::vector<std::string> q_dims = {kBatchDim, kSeqDim, "kv_heads", "group", "head"};
  const std::vector<std::string> kv_dims = {kBatchDim, kSeqDim, "kv_heads", "head"};
  ValueId wq = b.param("wq", Shape{d.embed, d.kv_heads, d.group, d.head}, normal(kInitStd));
  ValueId wk = b.param("wk", Shape{d.embed, d.kv_heads, d.head}, normal(kInitStd));
  ValueId wv = b.param("wv", Shape{d.embed, d.kv_heads, d.head}, normal(kInitStd));
  ValueId q = b.rotary(b.einsum(x, wq, q_dims, "q"), "head", kSeqDim, c.rope_theta, c.rope_scaling,
                       "q_rotary");
  ValueId k = b.rotary(b.einsum(x, wk, kv_dims, "k"), "head", kSeqDim, c.rope_theta, c.rope_scaling,
                       "k_rotary");
  k = b.rename(k, kSeqDim, kKeySeqDim, "k_keys");
  ValueId v = b.rename(b.einsum(x, wv, kv_dims, "v"), kSeqDim, kKeySeqDim, "v_keys");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.head.size));
  ValueId mixed;
  if (c.fused_attention) {
    // The fused op pairs each query head with a key head of the same dims:
    // keys and values are expanded over `group` (torchtitan's repeat_kv);
    // their gradients sum over it.
    const Shape kv_per_query{d.batch, Dim{kKeySeqDim, d.seq.size}, d.kv_heads, d.group, d.head};
    mixed = b.attention(q, b.expand(k, kv_per_query, "k_per_query"),
                        b.expand(v, kv_per_query, "v_per_query"), kSeqDim, kKeySeqDim, "head", true,
                        scale, "core")
                .out;
  } else {
    ValueId scores =
        b.einsum(q, k, {kBatchDim, "kv_heads", "group", kSeqDim, kKeySeqDim}, "scores");
    ValueId probs = b.softmax(scores, kKeySeqDim, scale, kSeqDim, "probs");
    mixed = b.einsum(probs, v, q_dims, "mix");
  }
  ValueId wo = b.param("wo", Shape{d.kv_heads, d.group, d.head, d.embed}, normal(out_std));
  return b.einsum(mixed, wo, {kBatchDim, kSeqDim, "embed"}, "o");
}

ValueId swiglu(GraphBuilder& b, const LlamaDims& d, ValueId x, float out_std) {
  GraphBuilder::Scope scope(b, "mlp");
  ValueId w1 = b.param("w1", Shape{d.embed, d.hidden}, normal(kInitStd));
  ValueId w3 = b.param("w3", Shape{d.embed, d.hidden}, normal(out_std));
  ValueId w2 = b.param("w2", Shape{d.hidden, d.embed}, normal(out_std));
  ValueId gate = b.silu(b.einsum(x, w1, {kBatchDim, kSeqDim, "hidden"}, "gate"), "act");
  ValueId up = b.einsum(x, w3, {kBatchDim, kSeqDim, "hidden"}, "up");
  ValueId h = b.mul(gate, up, "gated");
  return b.einsum(h, w2, {kBatchDim, kSeqDim, "embed"}, "down");
}

ValueId rmsnorm(GraphBuilder& b, const LlamaDims& d, const LlamaConfig& c, ValueId x,
                const std::string& name) {
  GraphBuilder::Scope scope(b, name);
  ValueId gamma = b.param("gamma", Shape{d.embed}, ParamInit{ParamInit::kOnes});
  return b.rmsnorm(x, gamma, "embed", c.norm_eps);
}

}  // namespace

int64_t llama_hidden_size(const LlamaConfig& c) {
  int64_t hidden = 2 * (4 * c.d_model) / 3;
  if (c.ffn_dim_multiplier > 0)
    hidden = static_cast<int64_t>(c.ffn_dim_multiplier * static_cast<double>(hidden));
  return c.multiple_of * ((hidden + c.multiple_of - 1) / c.multiple_of);
}

TaskGraph build_llama(GraphBuilder& b, const LlamaConfig& c, int64_t batch) {
  const int64_t head = c.d_model / c.n_head;
  const LlamaDims d{{kBatchDim, batch},
                    {kSeqDim, c.context},
                    {"embed", c.d_model},
                    {"kv_heads", c.n_kv_head},
                    {"group", c.n_head / c.n_kv_head},
                    {"head", head},
                    {"hidden", llama_hidden_size(c)},
                    {"vocab", c.vocab}};
  const ValueId tokens = b.input("tokens", Shape{d.batch, d.seq}, DType::kI32);
  const ValueId targets = b.input("targets", Shape{d.batch, d.seq}, DType::kI32);
  ValueId table = b.param("tok_embeddings", Shape{d.vocab, d.embed}, normal(1.0f));
  ValueId x = b.embedding(table, tokens, "vocab", "tok_emb");
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    GraphBuilder::Scope scope(b, block_scope(static_cast<int>(layer)));
    const float out_std = kInitStd / std::sqrt(2.0f * static_cast<float>(layer + 1));
    x = b.add(x, gqa_attention(b, d, c, rmsnorm(b, d, c, x, "attn_norm"), out_std),
              "attn_residual");
    x = b.add(x, swiglu(b, d, rmsnorm(b, d, c, x, "mlp_norm"), out_std), "mlp_residual");
  }
  ValueId h = rmsnorm(b, d, c, x, "norm_f");
  const float head_std = 1.0f / std::sqrt(static_cast<float>(c.d_model));
  ValueId output = b.param("output", Shape{d.embed, d.vocab}, normal(head_std));
  return lm_loss(b, h, output, targets, c.fused_loss);
}

}  // namespace tessel
