// The one place point-to-point actions are derived from a compute order.
//
// For stage k of S = p*v stages and micro-batch i:
//   before F  on k > 0:     recv_act  from rank_of(k-1)
//   after  F  on k < S-1:   send_act  to   rank_of(k+1)
//   before B/BI on k < S-1: recv_grad from rank_of(k+1)
//   after  B/BI on k > 0:   send_grad to   rank_of(k-1)
// The send sits right after the compute that produces its payload, the recv
// right before the compute that consumes it, so a schedule's communication
// never runs ahead of or behind its compute order. Sends carry the sender's
// chunk, recvs the receiver's.
#pragma once

#include "tessel/schedule/schedule.h"

namespace tessel {

// Rewrites s.actions in place with the sends and recvs above inserted.
// Throws an Error naming the action if s already holds a send or recv, or an
// action's chunk is outside [0, s.chunks).
void insert_communication(Schedule& s);

}  // namespace tessel
