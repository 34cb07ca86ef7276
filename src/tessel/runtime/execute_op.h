// Runs one node of a compiled program on its kernel.
//
// The dispatch is one switch over OpKind: it turns named-dim shapes into the
// flat sizes and strides the kernels take, and picks the fast kernel or its
// `_ref` twin. Views never reach it (they alias their input).
#pragma once

#include <cstddef>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/kernels/einsum.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/runtime/dropout_op.h"

namespace tessel {
class CommGroups;
}

namespace tessel {

struct OpCall {
  const Graph& graph;
  const Node& node;
  const std::vector<void*>& values;  // storage of every value, by id
  void* out;
  void* scratch;  // scratch_bytes() bytes, or nullptr
  const kernels::EinsumPlan* einsum;
  bool reference;
  const CommGroups* comms;  // collectives and sharded ops; nullptr in a single process
  // Set for einsums of a bf16 program: they run on it (the scratch is its own).
  const kernels::EinsumBf16* einsum_bf16 = nullptr;
  // Per einsum input: its bf16 copy (a weight's, made once per phase) or its
  // bf16 storage (a bf16-stored activation), or nullptr. For an all-gather
  // that carries bf16: input 0's bf16 storage, or nullptr (f32: rounded first).
  const void* bf16_in[2] = {nullptr, nullptr};
  // An einsum with a bias add fused into it (Program: oneDNN's bf16 route):
  // the bias parameter, added to its output; `out` is the add's storage.
  const float* bias = nullptr;
  // The output is stored in bf16 and `out` is bf16: an all-gather carries
  // bf16 (half the bytes; the same values as gathering f32 and rounding); an
  // einsum's matmul (EinsumBf16, told so when it was built) and the kernels
  // of writes_bf16_itself() round their own results as they store them.
  bool bf16_out = false;
  // A sum all-reduce or reduce-scatter that carries bf16 and adds in f32
  // (CompileOptions::bf16_partial_sums); `scratch` is its work buffer.
  bool bf16_sum = false;
  // The step and micro-batch dropout masks are keyed by (runtime/dropout_op.h).
  DropoutPosition position{};
};

// Input i's shape and storage.
inline const Shape& in_shape(const OpCall& call, int i) {
  return call.graph.node(call.node.inputs[i]).shape;
}
inline const float* in_f32(const OpCall& call, int i) {
  return static_cast<const float*>(call.values[call.node.inputs[i]]);
}
inline const int32_t* in_i32(const OpCall& call, int i) {
  return static_cast<const int32_t*>(call.values[call.node.inputs[i]]);
}

void execute_op(const OpCall& call);

// Whether execute_op writes `node`'s output in bf16 itself when bf16_out is
// set (a `_to_bf16` kernel: binary ops, bias-GELU, LayerNorm, softmax's
// backward); other producers of a bf16-stored value write f32 that the
// program rounds afterwards.
bool writes_bf16_itself(const Node& node);

// Bytes of per-instruction scratch a node needs.
size_t scratch_bytes(const Graph& graph, const Node& node, const kernels::EinsumPlan* einsum);
// The same for an all-gather that carries bf16 (OpCall::bf16_out), with its
// input in bf16 storage (in_bf16) or f32 (rounded into scratch first).
size_t bf16_all_gather_scratch_bytes(const Graph& graph, const Node& node, bool in_bf16);
// The same for a partial sum that carries bf16 (OpCall::bf16_sum): the
// communicator's work buffer, after a reduce-scatter's f32 packing.
size_t bf16_sum_scratch_bytes(const Graph& graph, const Node& node);

}  // namespace tessel
