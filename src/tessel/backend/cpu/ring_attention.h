// Ring attention (context parallelism, docs/attention.md): fused attention
// whose q is this rank's chunk of the sequence and whose k and v are this
// rank's chunk of the keys, on a mesh axis of n ranks (attrs.axis, count,
// offset = this rank's coordinate; set by the lowering,
// sharding/context_parallel.h).
//
// Load balancing (sharding/context_parallel.h): the op first moves its
// halves of q, k, v (backward: q, dout, lse, k, v) so that rank r holds
// sequence halves r and 2n-1-r of 2n (backend/cpu/ring_halves.h), runs the
// ring on those, and moves the results back (out, lse; dq, dk, dv). Each
// chunk pair is four half pairs; causal half pairs with every key after
// every query are skipped, so every rank computes two half pairs' worth
// (a quarter of a contiguous chunk pair's full work each) at every step.
//
// Forward: n steps; at step t the rank holds the key/value chunk of rank
// (r - t) mod n, starts sending it to rank r + 1, computes its query halves
// against its halves (the diagonal masked, later halves skipped) and merges
// each half pair's output and log-sum-exp into its own, then receives the
// next chunk from rank r - 1. Backward: the same ring twice, first summing
// each query's delta over every chunk (the kernel's first pass, kept exact:
// docs/attention.md), then computing dq here and dk, dv into accumulators
// that travel with their chunk and arrive home after a last send.
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
