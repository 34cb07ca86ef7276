// One instruction of a compiled program as a backend's kernel receives it:
// the node, the storage of every value, its output, scratch and the kernel
// state prepared for it when the program was compiled.
//
// Every pointer here is backend memory (MemorySpace::kDevice): a kernel
// dereferences it, nothing else does. Views never reach a kernel (they alias
// their input).
#pragma once

#include <cstdint>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/kernels/einsum.h"
#include "tessel/kernels/einsum_bf16.h"

namespace tessel {

class CommGroups;

// The step and micro-batch dropout masks are keyed by (backend/cpu/dropout_op.h):
// set by the trainer once per step and by the pipeline executor per micro-batch.
struct DropoutPosition {
  int64_t step = 0;
  int64_t microbatch = 0;
};

struct OpCall {
  const Graph& graph;
  const Node& node;
  const std::vector<void*>& values;  // storage of every value, by id
  void* out;
  void* scratch;  // Backend::scratch_bytes() bytes, or nullptr
  const kernels::EinsumPlan* einsum;
  bool reference;
  const CommGroups* comms;  // collectives and sharded ops; nullptr in a single process
  // Set for einsums of a bf16 program: they run on it (the scratch is its own).
  const kernels::EinsumBf16* einsum_bf16 = nullptr;
  // Per einsum input: its bf16 copy (a weight's, made once per phase) or its
  // bf16 storage (a bf16-stored activation), or nullptr. For an all-gather
  // that carries bf16: input 0's bf16 storage, or nullptr (f32: rounded first).
  // Fused attention: q, k, v and (its gradient op) dout's bf16 storage, or
  // nullptr, in entries 0 to 3.
  const void* bf16_in[4] = {nullptr, nullptr, nullptr, nullptr};
  // An einsum with a bias add fused into it (Program: oneDNN's bf16 route):
  // the bias parameter, added to its output; `out` is the add's storage.
  const float* bias = nullptr;
  // The output is stored in bf16 and `out` is bf16: an all-gather carries
  // bf16 (half the bytes; the same values as gathering f32 and rounding); an
  // einsum's matmul (EinsumBf16, told so when it was built) and the kernels
  // of Backend::writes_bf16_itself() round their own results as they store them.
  bool bf16_out = false;
  // A sum all-reduce or reduce-scatter that carries bf16 and adds in f32
  // (CompileOptions::bf16_partial_sums); `scratch` is its work buffer.
  bool bf16_sum = false;
  // A bf16 program (CompileOptions::bf16): an op whose products an einsum
  // would make (fused attention) rounds their operands to bf16 and keeps
  // its statistics and sums in f32.
  bool bf16_operands = false;
  DropoutPosition position{};
  // The threads the program was planned for (CompileOptions::threads): a
  // kernel whose scratch holds a block per thread runs on at most these.
  int threads = 1;
};

// Input i's shape and storage, and the output's storage as f32.
inline const Shape& in_shape(const OpCall& call, int i) {
  return call.graph.node(call.node.inputs[i]).shape;
}
inline const float* in_f32(const OpCall& call, int i) {
  return static_cast<const float*>(call.values[call.node.inputs[i]]);
}
inline const int32_t* in_i32(const OpCall& call, int i) {
  return static_cast<const int32_t*>(call.values[call.node.inputs[i]]);
}
inline float* out_f32(const OpCall& call) { return static_cast<float*>(call.out); }

}  // namespace tessel
