// PipeDream-Flush / 1F1B (Narayanan et al. 2021): rank r runs
// w = min(p-1-r, m) warm-up forwards, then alternates F(w+k), B(k), then
// drains the last w backwards. At most min(p-r, m) micro-batches are in
// flight on rank r; the bubble is the same as GPipe's, (p-1)/(m+p-1).
#include <algorithm>

#include "tessel/schedule/builders.h"

namespace tessel {

RankOrders one_f_one_b_order(int ranks, int microbatches) {
  RankOrders orders(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::vector<Action>& list = orders[r];
    const int warmup = std::min(ranks - 1 - r, microbatches);
    for (int i = 0; i < warmup; ++i) list.push_back({ActionKind::kForward, i});
    for (int k = 0; k + warmup < microbatches; ++k) {
      list.push_back({ActionKind::kForward, warmup + k});
      list.push_back({ActionKind::kBackward, k});
    }
    for (int k = microbatches - warmup; k < microbatches; ++k)
      list.push_back({ActionKind::kBackward, k});
  }
  return orders;
}

}  // namespace tessel
