// Fused attention as the CPU backend runs it: the node's named shapes turned
// into the kernel's strides (kernels/attention.h), and the tuple's element
// pointers (ir/tuple.h) handed to it as outputs.
#pragma once

#include <cstddef>

#include "tessel/backend/op_call.h"

namespace tessel {

void execute_attention(const OpCall& call);  // (q, k, v) -> (out, lse)
void execute_attention_grad(const OpCall& call);
// The backward's scratch: each query's delta = rowsum(p * dp).
size_t attention_grad_scratch_bytes(const Graph& graph,
                                    const Node& node);  // (q, k, v, lse, dout) -> (dq, dk, dv)

}  // namespace tessel
