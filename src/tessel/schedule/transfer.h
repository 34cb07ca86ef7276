// Transfer: the point-to-point message a send or recv action takes part in,
// named by what it carries rather than by who sends it: direction, source
// stage, destination stage, micro-batch. A send and a recv match when their
// Transfers are equal. Activations go from stage k to k+1, gradients from
// k+1 to k.
#pragma once

#include <compare>

#include "tessel/schedule/schedule.h"

namespace tessel {

struct Transfer {
  bool gradient = false;
  int src_stage = 0;
  int dst_stage = 0;
  int microbatch = 0;

  auto operator<=>(const Transfer&) const = default;
};

// The transfer of the send or recv at s.actions[rank][index]. Throws an
// Error naming the action if its stage has no neighbour in its direction
// (an activation leaving the last stage, a gradient entering it, ...) or its
// peer is not the rank that holds the neighbour.
// REQUIRES: the action is a send or recv whose chunk is in [0, s.chunks).
Transfer transfer_of(const Schedule& s, int rank, int index);

}  // namespace tessel
