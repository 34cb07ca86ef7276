// Megatron-LM interleaved 1F1B (Narayanan et al. 2021, "Efficient
// Large-Scale Language Model Training on GPU Clusters").
//
// Each rank holds v chunks; the m*v (micro-batch, chunk) units run in
// groups of p micro-batches: forward unit u covers chunk (u mod pv) / p of
// micro-batch (u / pv) * p + u mod p, and backward unit u the same micro-batch
// with the chunks visited in reverse. Rank r runs (p-1-r)*2 + (v-1)*p warm-up
// forward units (capped at m*v), then alternates one forward and one backward
// unit, then drains. Peak units in flight on rank r: min(2(p-1-r) + (v-1)p + 1,
// m*v), i.e. vp + p - 1 chunk-sized units on rank 0 (a factor 1 + (p-1)/(pv)
// over 1F1B's p full-stage micro-batches). Bubble (p-1)/(vm + p - 1).
#include <algorithm>

#include "tessel/schedule/builders.h"

namespace tessel {
namespace {

Action unit(int u, int ranks, int chunks, ActionKind kind) {
  const int group = ranks * chunks;
  int chunk = (u % group) / ranks;
  if (kind == ActionKind::kBackward) chunk = chunks - 1 - chunk;
  return {kind, (u / group) * ranks + u % ranks, chunk};
}

}  // namespace

RankOrders interleaved_order(int ranks, int microbatches, int chunks) {
  const int units = microbatches * chunks;
  RankOrders orders(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::vector<Action>& list = orders[r];
    const int warmup = std::min((ranks - 1 - r) * 2 + (chunks - 1) * ranks, units);
    for (int u = 0; u < warmup; ++u) list.push_back(unit(u, ranks, chunks, ActionKind::kForward));
    for (int k = 0; k + warmup < units; ++k) {
      list.push_back(unit(warmup + k, ranks, chunks, ActionKind::kForward));
      list.push_back(unit(k, ranks, chunks, ActionKind::kBackward));
    }
    for (int k = units - warmup; k < units; ++k)
      list.push_back(unit(k, ranks, chunks, ActionKind::kBackward));
  }
  return orders;
}

}  // namespace tessel
