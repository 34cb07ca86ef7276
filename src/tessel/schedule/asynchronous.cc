// Asynchronous pipelines without a flush: PipeDream (Narayanan et al. 2019),
// PipeDream-2BW (Narayanan et al. 2021) and XPipe (Guan et al. 2019).
//
// All three run 1F1B's order over m micro-batches, and the optimizer steps
// on each rank without waiting for the other micro-batches to drain. A step
// carries the last micro-batch whose gradient it applies:
//   pipedream, xpipe: a step after every B(i) (step_every = 1). PipeDream
//     stashes the weights F(i) used so that B(i) uses them too (p - r
//     versions on rank r in steady state); XPipe runs F(i) on weights
//     predicted from the current ones and B(i) on the current ones, so it
//     keeps one version.
//   2bw: a step after every group of p backwards (step_every = p, gradients
//     accumulated over p micro-batches) and after the last one; with 1F1B's
//     order no micro-batch in flight is more than one step behind, so two
//     weight versions suffice.
#include "tessel/schedule/builders.h"

namespace tessel {

RankOrders asynchronous_order(int ranks, int microbatches, int step_every) {
  RankOrders orders = one_f_one_b_order(ranks, microbatches);
  for (std::vector<Action>& list : orders) {
    std::vector<Action> out;
    for (const Action& a : list) {
      out.push_back(a);
      const int i = a.microbatch;
      if (a.kind == ActionKind::kBackward && ((i + 1) % step_every == 0 || i == microbatches - 1))
        out.push_back({ActionKind::kOptimizerStep, i});
    }
    list = std::move(out);
  }
  return orders;
}

}  // namespace tessel
