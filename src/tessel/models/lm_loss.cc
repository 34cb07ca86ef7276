#include "tessel/models/lm_loss.h"

#include "tessel/ir/model_contract.h"

namespace tessel {

ValueId lm_loss(GraphBuilder& b, ValueId h, ValueId w, ValueId targets, bool fused,
                std::optional<ValueId>& logits) {
  if (fused) {
    logits.reset();
    return b.linear_cross_entropy(h, w, targets, "vocab", "embed", "lm_head_loss");
  }
  logits = b.einsum(h, w, {kBatchDim, kSeqDim, "vocab"}, "lm_head");
  return b.cross_entropy(*logits, targets, "vocab", "loss");
}

}  // namespace tessel
