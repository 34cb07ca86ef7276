// The FLOPs the cost model charges a non-GEMM instruction
// (HardwareModel::kernel_seconds's `flops`).
//
// Graph::node_flops counts a fused attention's full, unmasked q.k and p.v
// products (2.5 times that for its gradient: the backward's five products,
// in one process and in ring attention). The fused kernels skip the
// blocks a causal mask hides (docs/attention.md), so a causal attention
// that runs whole on one rank is charged half its node FLOPs: the
// convention of FlashAttention's own benchmarks (causal FLOPs halved), which
// the measured attention rates (kernel_rates.h) and the cluster files'
// attention efficiency (cluster_spec.h) are stated against. A ring-split
// attention is charged its whole chunk pair: the simulator's ring
// (program_simulator.h) takes the causal half itself. Every other
// instruction: node_flops.
#pragma once

#include "tessel/ir/graph.h"

namespace tessel::plan {

double kernel_work_flops(const Graph& g, ValueId node);

// The bytes an instruction moves (HardwareModel::kernel_seconds's `bytes`):
// its output and every input, at their dtypes.
double instruction_bytes(const Graph& g, ValueId node);

// The Philox draws an instruction makes (HardwareModel::draw_seconds): a
// dropout, one per element; a fused attention or its gradient with dropout
// on the probabilities, one per probability it forms, halved where its FLOPs
// are (the forward draws each visible one, the backward redraws it).
double kernel_work_draws(const Graph& g, ValueId node);

}  // namespace tessel::plan
