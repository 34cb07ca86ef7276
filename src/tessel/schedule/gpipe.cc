// GPipe (Huang et al. 2019): all forwards, then all backwards, each in
// micro-batch order. Every rank holds all m micro-batches' activations at the
// flush; bubble (p-1)/(m+p-1) of each rank's time.
#include "tessel/schedule/builders.h"

namespace tessel {

RankOrders gpipe_order(int ranks, int microbatches) {
  RankOrders orders(ranks);
  for (std::vector<Action>& list : orders) {
    for (int i = 0; i < microbatches; ++i) list.push_back({ActionKind::kForward, i});
    for (int i = 0; i < microbatches; ++i) list.push_back({ActionKind::kBackward, i});
  }
  return orders;
}

}  // namespace tessel
