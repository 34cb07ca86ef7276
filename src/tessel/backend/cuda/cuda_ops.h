// The CUDA backend's kernel table: one entry per op kind, like the CPU's
// (backend/cpu/cpu_kernels.h), each turning a node's named-dim shapes into
// the flat sizes and strides of a launcher in cuda_kernels.h (or an einsum
// on cuBLASLt). Entries are empty for the collectives and local reshards
// and execute_cuda_kernel refuses every sharded op (backend/cpu/
// sharded_ops.h's is_sharded_op): "not on CUDA yet"; bf16
// einsums are refused too. OpCall::reference is ignored (CUDA has one form
// of each kernel). Compiled only: not run on a GPU yet.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <set>
#include <vector>

#include "tessel/backend/op_call.h"
#include "tessel/ir/op.h"

namespace tessel {
namespace cuda {
class Gemm;
}

struct CudaContext {
  cudaStream_t stream;
  cuda::Gemm& gemm;
};
using CudaKernel = void (*)(const OpCall&, const CudaContext&);
using CudaKernelTable = std::array<CudaKernel, static_cast<size_t>(OpKind::kCount)>;

const CudaKernelTable& cuda_kernel_table();
// The instruction op kinds (cpu_kernels.h's is_instruction_kind) with no
// CUDA kernel: the collectives and local reshards and
// cuda_kernels_not_written_yet().
std::vector<OpKind> op_kinds_without_cuda_kernel();
// Op kinds that have CPU kernels but no CUDA kernel yet: the Llama family's
// ops and fused attention. A program holding one is refused when it runs on
// CUDA
// ("rmsnorm 'block0.attn_norm' has no CUDA kernel yet"). The coverage test
// (tests/cuda/cuda_op_harness_test.cc) holds the table to exactly this list.
inline const std::set<OpKind>& cuda_kernels_not_written_yet() {
  static const std::set<OpKind> kinds = {OpKind::kSilu,
                                         OpKind::kSigmoid,
                                         OpKind::kSqrt,
                                         OpKind::kRsqrt,
                                         OpKind::kRmsNorm,
                                         OpKind::kRotary,
                                         OpKind::kSiluGrad,
                                         OpKind::kSigmoidGrad,
                                         OpKind::kRmsNormGradInput,
                                         OpKind::kRmsNormGradGamma,
                                         OpKind::kRotaryGrad,
                                         OpKind::kAttention,
                                         OpKind::kAttentionGrad,
                                         OpKind::kLinearCrossEntropy,
                                         OpKind::kLinearCrossEntropyGrad};
  return kinds;
}

void execute_cuda_kernel(const OpCall& call, const CudaContext& context);
size_t cuda_scratch_bytes(const Graph& graph, const Node& node, const kernels::EinsumPlan* einsum);
bool cuda_writes_bf16_itself(const Node& node);

}  // namespace tessel
