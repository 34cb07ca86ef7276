// Ring attention (context parallelism, docs/attention.md): fused attention
// whose q is this rank's chunk of the sequence and whose k and v are this
// rank's chunk of the keys, on a mesh axis of n ranks (attrs.axis, count,
// offset = this rank's coordinate; set by the lowering,
// sharding/context_parallel.h).
//
// Load balanced: the op moves its halves of q, k, v (backward q, dout,
// lse, k, v) so that rank r holds halves r and 2n-1-r of the sequence's 2n
// (Halves, HalfExchange), runs the ring on those and moves the results back. At
// step t of n it holds the key/value chunk of rank (r - t) mod n, sends it
// on to r + 1 while computing its half pairs against it (causal: those with
// every key after every query skipped; two half pairs' worth per step on
// every rank), merges their outputs by log-sum-exp, and receives the next.
// Backward: the same ring twice, first summing each query's delta (the
// kernel's first pass, kept exact: docs/attention.md), then dq here and dk,
// dv into accumulators that travel with their chunk and arrive home.
// Invariants: every rank sums in a fixed order (its chunks in ring order),
// so results are bitwise the same run to run.
#pragma once

#include <cstddef>

#include "tessel/backend/op_call.h"
#include "tessel/comm/comm_groups.h"

namespace tessel {

bool is_ring_attention(const Node& node);
void execute_ring_attention(const OpCall& call, Communicator& comm);
void execute_ring_attention_grad(const OpCall& call, Communicator& comm);
size_t ring_attention_scratch_bytes(const Graph& graph, const Node& node);

}  // namespace tessel
