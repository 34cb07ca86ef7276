// The time of one bf16 gradient all-reduce as Communicator::all_reduce_bf16
// runs it, shared by the exact cost model (cost_model.cc) and screening
// (screen.cc) so that both charge the same thing. It is blocking: the
// runtime reduces a bf16 bucket at its last member, never overlapped.
//
// For n = f32_bytes / 4 elements on p ranks: the values rounded to bf16
// (read 4n, write 2n), an all-to-all of the 2n bf16 bytes, each rank adding
// its chunk of every rank's values in f32 (read 2n, write the 2n / p byte
// chunk), an all-gather of the chunks, the sums widened (read 2n, write 4n).
#pragma once

#include <cmath>

#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

// `collective(kind, bytes)` prices a collective on the bucket's axis of p
// ranks; `memory(bytes)` a pass over that many bytes on the rank.
template <class Collective, class Memory>
double bf16_all_reduce_seconds(double f32_bytes, int p, const Collective& collective,
                               const Memory& memory) {
  if (p < 2) return 0;
  const double n = f32_bytes / 4;
  const double chunk = std::ceil(n / p) * 2;  // bytes of one rank's chunk
  return memory(6 * n) + collective(CollectiveKind::kAllToAll, 2 * n) + memory(2 * n + chunk) +
         collective(CollectiveKind::kAllGather, chunk) + memory(6 * n);
}

}  // namespace tessel::plan
