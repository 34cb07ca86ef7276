// The CPU backend's kernels: one entry per op kind, in one table.
//
// Each entry turns a node's named-dim shapes into the flat sizes and strides
// the kernels (kernels/) take (the helpers below, shared with the CUDA table), and picks the fast
// kernel or its `_ref` twin (OpCall::reference). Every op kind that can be an instruction (not a
// leaf, not a view) has an entry; tests/backend checks that the table is complete.
#pragma once

#include <array>
#include <cstddef>

#include "tessel/backend/op_call.h"
#include "tessel/ir/op.h"

namespace tessel {

using CpuKernel = void (*)(const OpCall&);
using CpuKernelTable = std::array<CpuKernel, static_cast<size_t>(OpKind::kCount)>;

// Whether nodes of this kind run as instructions (leaves and views do not).
bool is_instruction_kind(OpKind kind);
const CpuKernelTable& cpu_kernel_table();

// Runs one instruction: the sharded forms (collectives, vocab-sharded
// embedding and cross-entropy, sharded dropout; backend/cpu/sharded_ops.h)
// or the table's entry for its kind.
void execute_cpu_kernel(const OpCall& call);
size_t cpu_scratch_bytes(const Graph& graph, const Node& node, const kernels::EinsumPlan* einsum,
                         int threads, bool bf16_operands);
bool cpu_writes_bf16_itself(const Node& node);

// The flat per-dim arrays both kernel tables (this one and the CUDA one,
// backend/cuda/cuda_ops.cc) hand their kernels: fixed arrays on the stack, so
// dispatch allocates nothing. check_kernel_rank throws "<op> '<name>': rank R
// of <shape> exceeds the <kernels> limit of 8" for a larger rank.
constexpr int kMaxKernelRank = 8;
using DimArray = std::array<int64_t, kMaxKernelRank>;
void check_kernel_rank(const OpCall& call, const Shape& s, const char* kernels);
// Strides of `x` laid over the dims of `target` (0 where x lacks the dim).
DimArray strides_over(const Shape& x, const Shape& target);
DimArray sizes_of(const Shape& s);

}  // namespace tessel
