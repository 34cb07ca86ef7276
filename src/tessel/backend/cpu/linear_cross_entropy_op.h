// The fused LM head and loss (linear_cross_entropy, ir/op.h) as the CPU
// backend runs it: the node's shapes turned into the kernel's
// (kernels/linear_cross_entropy.h), its shards joined, its tuple filled.
// Sharded as the lowering marks it (sharding/lower.cc):
// - rows split (attrs.total, the global rows): the loss is this rank's
//   share of the global mean, dh this rank's rows, dw a partial sum;
// - vocab split over mesh axis attrs.axis (attrs.count ranks, this rank's
//   first vocab row attrs.offset): each row's max, sum of exponentials and
//   label logit are reduced across the axis, so the loss and log-sum-exp are
//   whole on every rank; dh is a partial sum, dw this rank's vocab rows.
// Labels are checked against the global vocab before any product.
#pragma once

#include <cstddef>

#include "tessel/backend/op_call.h"

namespace tessel {

void execute_linear_cross_entropy(const OpCall& call);       // (h, w, labels) -> (loss, lse)
void execute_linear_cross_entropy_grad(const OpCall& call);  // (.., lse, dloss) -> (dh, dw)
// The kernel's scratch (one tile of logits, bf16 copies) and, in the
// forward, each row's three statistics.
size_t linear_cross_entropy_scratch_bytes(const Graph& graph, const Node& node, bool bf16);

}  // namespace tessel
