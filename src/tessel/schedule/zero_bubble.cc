// ZB-H1, the handcrafted schedule of Qi et al. 2023 ("Zero Bubble Pipeline
// Parallelism").
//
// Built from 1F1B: every B becomes BI (input gradient), so F and BI run in
// exactly 1F1B's order and 1F1B's F-to-BI in-flight count, min(p-r, m) on
// rank r, is kept. The weight gradient BW(i) is deferred by r micro-batches
// on rank r: it runs right after BI(i + r), and the last r run after the last
// BI. Later ranks thus hand gradients upstream sooner and fill their own tail
// with BW, which removes the end-of-step bubble. Counting a micro-batch as in
// flight from its F to its BW (as check_schedule does), rank r holds at most
// min(p, m) = 1F1B's rank-0 peak: no rank exceeds 1F1B's worst rank, which
// is the paper's memory claim for ZB-H1 (the r extra micro-batches keep only
// what BW needs). With F = BI = BW = 1 the bubble fraction on every rank is
// (p-1)/(3m+p-1) for m >= p, a third of 1F1B's (p-1) idle units on each
// side; for m < p it is (2p-m-1)/(2m+2p-1).
#include "tessel/schedule/builders.h"

namespace tessel {

RankOrders zero_bubble_h1_order(int ranks, int microbatches) {
  RankOrders orders = one_f_one_b_order(ranks, microbatches);
  for (int r = 0; r < ranks; ++r) {
    std::vector<Action> list;
    int next_weight = 0;  // micro-batch of the next BW to place
    for (const Action& a : orders[r]) {
      const bool forward = a.kind == ActionKind::kForward;
      list.push_back(forward ? a : Action{ActionKind::kBackwardInput, a.microbatch, a.chunk});
      if (!forward && a.microbatch - r >= 0)
        list.push_back({ActionKind::kBackwardWeight, next_weight++, a.chunk});
    }
    while (next_weight < microbatches)
      list.push_back({ActionKind::kBackwardWeight, next_weight++, 0});
    orders[r] = std::move(list);
  }
  return orders;
}

}  // namespace tessel
