// The loss of a language model (the GPT, the Llama): its last hidden states
// h (batch, seq, embed) through the LM head w (vocab and embed, in either
// order) to the mean cross-entropy against the targets (batch, seq).
// Unfused: an einsum named "lm_head" whose logits (batch, seq, vocab) the
// cross_entropy "loss" reads and its backward keeps; fused: one
// linear_cross_entropy "lm_head_loss" (ir/builder.h) that never stores them,
// and the graph has no logits. Both are the same function.
#pragma once

#include <optional>

#include "tessel/ir/builder.h"

namespace tessel {

// Returns the loss; sets `logits` when they exist (unfused).
ValueId lm_loss(GraphBuilder& b, ValueId h, ValueId w, ValueId targets, bool fused,
                std::optional<ValueId>& logits);

}  // namespace tessel
