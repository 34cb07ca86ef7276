// Fused attention as the CPU backend runs it: the node's named shapes turned
// into the kernel's strides (kernels/attention.h), and the tuple's element
// pointers (ir/tuple.h) handed to it as outputs.
#pragma once

#include <cstddef>

#include "tessel/backend/op_call.h"
#include "tessel/kernels/attention.h"

namespace tessel {

// The kernel's view of the node's local shapes (strides, rows, flags).
kernels::AttentionLayout attention_layout_of(const OpCall& call);
// The same without a call (bf16 unset): what the scratch is sized from.
kernels::AttentionLayout attention_layout_of(const Graph& graph, const Node& node);
// Input i as stored: bf16 where the program passes its bf16 storage.
kernels::AttentionInput attention_input(const OpCall& call, int i);
// Element i of the node's output tuple.
float* tuple_element(const OpCall& call, int i);

void execute_attention(const OpCall& call);  // (q, k, v) -> (out, lse)
// (q, k, v, lse, dout, out) -> (dq, dk, dv); one process does not read out
// (its delta is summed from p and dp).
void execute_attention_grad(const OpCall& call);
// The backward's scratch (kernels::attention_backward_scratch_floats): each
// query's delta and one working block per thread, for the `threads` the
// program is planned for (CompileOptions::threads); the kernel runs on at
// most that many (OpCall::threads), so a count raised after compiling
// cannot overrun it.
size_t attention_grad_scratch_bytes(const Graph& graph, const Node& node, int threads);

}  // namespace tessel
