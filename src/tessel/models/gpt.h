// GPT: a decoder-only transformer over bytes, written with named dims.
//
// Token + position embedding, n_layer pre-LayerNorm blocks (causal multi-head
// attention — query and value projections with bias, key without, see gpt.cc —
// GELU MLP of 4x width), final LayerNorm, LM head tied to the token embedding. Dims: batch, seq,
// embed, heads, head, hidden, vocab; attention keys use `kseq`. Parameter names (wte, wpe,
// block0.attn.wq, ...) are the checkpoint's tensor names.
#pragma once

#include <cstdint>

#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"

namespace tessel {

struct GptConfig {
  int64_t n_layer = 4, n_head = 4, d_model = 128, context = 64, vocab = 256;
  float dropout = 0.0f;
  uint64_t seed = 0;  // dropout stream
  // One fused attention op (ir/builder.h; docs/attention.md) rather than
  // einsum, causal softmax, einsum: the same numbers (within 1e-6 in f32)
  // without the stored (batch, heads, seq, kseq) probabilities.
  bool fused_attention = true;
  // Dropout on the attention probabilities (0: none), drawn alike fused and
  // unfused (ir/builder.h, attention).
  float attention_dropout = 0.0f;
  // The LM head and loss as one linear_cross_entropy op (ir/builder.h): no
  // stored logits, so the graph has none.
  bool fused_loss = false;
};

// Inputs tokens and targets (batch, seq) i32; the loss in nats per token,
// the logits (batch, seq, vocab) (none with fused_loss). `training` enables
// dropout. seq = context.
TaskGraph build_gpt(GraphBuilder& b, const GptConfig& config, int64_t batch, bool training);

}  // namespace tessel
