// Llama: a decoder-only transformer of the Llama family (Llama 2/3, Mistral,
// Qwen), written with named dims.
//
// Token embedding (no positions: rotary positions turn queries and keys),
// n_layer pre-RMSNorm blocks (causal grouped-query attention, SwiGLU MLP),
// final RMSNorm, untied LM head; no biases, no dropout. As Meta's reference:
//   - grouped-query attention: n_kv_head key/value heads, each serving a
//     `group` of n_head / n_kv_head query heads. Queries carry the dims
//     (kv_heads, group, head), keys and values (kv_heads, head), so no head
//     is stored twice: the unfused scores einsum pairs queries with their
//     key head by name; the fused `attention` op (the default) reads keys
//     and values expanded over `group`, as torchtitan's repeat_kv. The tensor-parallel axis splits
//     `kv_heads` (as `heads` in GPT);
//   - rotary positions (the `rotary` op, theta = rope_theta, Llama 3.1's
//     frequency scaling with rope_scaling) on queries and keys, adjacent
//     pairs (2i, 2i+1) of `head` as Meta's complex view;
//   - SwiGLU: w2(silu(w1 x) * w3 x), the hidden size by Llama's rule
//     (llama_hidden_size).
// Dims: batch, seq, embed, kv_heads, group, head, hidden, vocab; attention
// keys use `kseq`. Parameter names (tok_embeddings, block0.attn.wq, ...,
// norm_f.gamma, output) are the checkpoint's tensor names.
#pragma once

#include <cstdint>

#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"

namespace tessel {

struct LlamaConfig {
  int64_t n_layer = 4, n_head = 4, n_kv_head = 4, d_model = 128, context = 64, vocab = 256;
  float rope_theta = 10000.0f;
  RotaryScaling rope_scaling;       // Llama 3.1's; none by default
  double ffn_dim_multiplier = 0.0;  // 0: none
  int64_t multiple_of = 256;
  float norm_eps = 1e-5f;
  bool fused_attention = true;  // the `attention` op; else einsum, softmax, einsum
  bool fused_loss = false;      // linear_cross_entropy: no stored logits (GptConfig)
};

// Llama's SwiGLU hidden size: 2/3 of 4 d_model, times ffn_dim_multiplier
// when set, rounded up to a multiple of multiple_of (integer steps as
// Meta's model.py: Llama 3 8B's 4096, 1.3, 1024 give 14336).
int64_t llama_hidden_size(const LlamaConfig& config);

// Inputs, loss and logits as build_gpt's (models/gpt.h). seq = context.
TaskGraph build_llama(GraphBuilder& b, const LlamaConfig& config, int64_t batch);

}  // namespace tessel
