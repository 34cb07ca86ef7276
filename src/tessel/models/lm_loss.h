// The loss of a language model (the GPT, the Llama): its last hidden states
// h (batch, seq, embed) through the LM head w (vocab and embed, in either
// order) to the mean cross-entropy against the targets (batch, seq).
// Unfused: an einsum named "lm_head" whose logits (batch, seq, vocab) the
// cross_entropy "loss" reads and its backward keeps; fused: one
// linear_cross_entropy "lm_head_loss" (ir/builder.h) that never stores them,
// and the graph has no logits. Both are the same function.
#pragma once

#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"

namespace tessel {

// The loss, and the logits when they exist (unfused).
TaskGraph lm_loss(GraphBuilder& b, ValueId h, ValueId w, ValueId targets, bool fused);

}  // namespace tessel
