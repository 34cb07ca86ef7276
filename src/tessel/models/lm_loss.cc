#include "tessel/models/lm_loss.h"

#include "tessel/ir/model_contract.h"

namespace tessel {

TaskGraph lm_loss(GraphBuilder& b, ValueId h, ValueId w, ValueId targets, bool fused) {
  if (fused)
    return {b.linear_cross_entropy(h, w, targets, "vocab", "embed", "lm_head_loss"), std::nullopt};
  const ValueId logits = b.einsum(h, w, {kBatchDim, kSeqDim, "vocab"}, "lm_head");
  return {b.cross_entropy(logits, targets, "vocab", "loss"), logits};
}

}  // namespace tessel
