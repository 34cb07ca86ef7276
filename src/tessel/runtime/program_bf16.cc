// Program's bf16 storage decisions (CompileOptions::bf16_activations and
// bf16_partial_sums): which values are stored in bf16, the bf16 copies made
// before the instructions that read them, the sums carried in bf16, and the
// queries the memory report and the planner ask about them.
#include <map>
#include <set>

#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"
#include "tessel/ir/op_table.h"
#include "tessel/runtime/program.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {
namespace {

// bf16 activations (CompileOptions::bf16_activations): an f32 value whose
// readers all round it to bf16 (einsums; an all-gather stored in bf16) is
// stored in bf16, and an all-gather producing such a value carries bf16.
bool stores_in_bf16(const CompileOptions& o, bool rounded_reads, bool other_reads, DType dtype) {
  return o.bf16 && o.bf16_activations && !o.reference_kernels && rounded_reads && !other_reads &&
         dtype == DType::kF32;
}

// Whether `node` reads input `i` rounded to bf16: an einsum, an all-gather
// whose output is stored in bf16 (it carries bf16), or fused attention's q,
// k, v (and its gradient's dout: input 4), which its kernel rounds.
bool rounds_input(const Node& node, size_t i, bool stored_bf16) {
  switch (node.kind) {
    case OpKind::kEinsum:
      return true;
    case OpKind::kAllGather:
      return stored_bf16;
    case OpKind::kAttention:
      return i < 3;
    case OpKind::kAttentionGrad:
      return i < 3 || i == 4;
    default:
      return false;
  }
}

}  // namespace

// An all-gather whose output is stored in bf16 carries bf16, so it reads
// its input as an einsum would: rounded. Readers come after what they
// read, so one pass in reverse decides every value after its readers.
void Program::choose_bf16_storage(const std::vector<ValueId>& outputs) {
  const Graph& g = *graph_;
  std::vector<bool>& stored = stored_bf16_;
  stored.assign(g.size(), false);
  if (!options_.bf16 || !options_.bf16_activations || options_.reference_kernels) return;
  std::vector<bool> bf16_read(g.size(), false), other_read(g.size(), false);
  for (ValueId out : outputs) other_read[alias_root_[out]] = true;
  for (auto it = instructions_.rbegin(); it != instructions_.rend(); ++it) {
    const ValueId id = it->value;
    const Node& node = g.node(it->node);
    stored[id] = !is_tuple(g.node(id)) &&
                 stores_in_bf16(options_, bf16_read[id], other_read[id], g.node(id).dtype);
    for (size_t i = 0; i < node.inputs.size(); ++i)
      (rounds_input(node, i, stored[id]) ? bf16_read : other_read)[alias_root_[node.inputs[i]]] =
          true;
    if (it->bias >= 0) other_read[alias_root_[it->bias]] = true;  // added in f32
  }
}

// bf16 copies, one per value and phase, made just before the phase's first
// einsum that reads the value: of every weight an einsum reads (a
// pipeline's forward and backward may run on different weight versions;
// with share_weight_copies every phase's copy is one shared slot), and of
// every f32 activation that two or more einsums read within
// kMaxActivationCopySpan instructions (e.g. the gradients of the MLP's
// pre-activation and of q, k and v, each read by a weight gradient and an
// input gradient), so it is rounded once rather than by each einsum. A
// longer-lived copy would hold memory across forward and backward
// (softmax's probabilities): those einsums round their own operands.
void Program::plan_bf16_copies() {
  if (!options_.bf16 || options_.reference_kernels) return;
  const Graph& g = *graph_;
  constexpr int kMaxActivationCopySpan = 4;
  auto copied = [&](ValueId root) {
    const Node& v = g.node(root);
    return !stored_bf16_[root] && v.dtype == DType::kF32 && v.kind != OpKind::kInput &&
           !is_tuple(v);
  };
  struct Reads {
    int count = 0, first = 0, last = 0;
  };
  std::map<std::pair<ValueId, int>, Reads> einsum_reads;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    if (instructions_[i].einsum_plan < 0) continue;
    const Node& node = g.node(instructions_[i].node);
    std::set<ValueId> roots{alias_root_[node.inputs[0]], alias_root_[node.inputs[1]]};
    for (ValueId root : roots) {
      Reads& r = einsum_reads[{root, phase_of(static_cast<int>(i))}];
      if (r.count++ == 0) r.first = static_cast<int>(i);
      r.last = static_cast<int>(i);
    }
  }
  auto wants_copy = [&](ValueId root, int phase) {
    if (!copied(root)) return false;
    if (g.node(root).kind == OpKind::kParam) return true;
    const Reads& r = einsum_reads.at({root, phase});
    return r.count >= 2 && r.last - r.first <= kMaxActivationCopySpan;
  };
  std::map<std::pair<ValueId, int>, int> copy_of;
  // share_weight_copies: a parameter's copies in every phase are one slot.
  const bool share =
      options_.share_weight_copies && options_.separate_phase_local && phase_count() > 1;
  std::map<ValueId, int> slot_of;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    Instruction& ins = instructions_[i];
    if (ins.einsum_plan < 0) continue;
    const Node& node = g.node(ins.node);
    kernels::Bf16Operands in;
    in.out = stored_bf16_[ins.value];  // the matmul rounds its own output
    for (int k = 0; k < 2; ++k) {
      const ValueId root = alias_root_[node.inputs[k]];
      if (stored_bf16_[root]) (k == 0 ? in.a : in.b) = true;  // read in place
      const int phase = phase_of(static_cast<int>(i));
      if (!wants_copy(root, phase)) continue;
      auto it = copy_of.find({root, phase});
      if (it == copy_of.end()) {
        const int64_t numel = g.node(root).shape.numel();
        bf16_copies_.push_back(
            {root, static_cast<int>(i), static_cast<int>(i), std::nullopt, numel});
        if (share && g.node(root).kind == OpKind::kParam) {
          auto [slot, added] = slot_of.emplace(root, static_cast<int>(slot_of.size()));
          if (added) {
            shared_copy_offset_.push_back(shared_copy_bytes_);
            shared_copy_bytes_ += round_up(static_cast<size_t>(numel) * sizeof(uint16_t));
          }
          bf16_copies_.back().shared = slot->second;
        }
        ins.make_copies.push_back(static_cast<int>(bf16_copies_.size()) - 1);
        it = copy_of.emplace(std::make_pair(root, phase), static_cast<int>(bf16_copies_.size()) - 1)
                 .first;
      }
      bf16_copies_[it->second].last = static_cast<int>(i);
      ins.bf16_copy[k] = it->second;
      (k == 0 ? in.a : in.b) = true;
    }
    einsum_bf16_.emplace_back(g.node(node.inputs[0]).shape, g.node(node.inputs[1]).shape,
                              node.shape, /*create_primitives=*/!options_.plan_only, in,
                              std::nullopt, /*with_bias=*/ins.bias >= 0);
    ins.einsum_bf16 = static_cast<int>(einsum_bf16_.size()) - 1;
  }
}

// Sums carried in bf16: with bf16_partial_sums, the sum all-reduces and
// reduce-scatters of f32 values that are no program output (outputs are
// gradients and the loss); and the reduce-scatters of bf16_reduce's
// outputs (ZeRO's gradients; their all-reduces are bf16 buckets above).
void Program::mark_bf16_sums(const std::vector<ValueId>& outputs) {
  std::set<ValueId> output_roots, bf16_reduce_roots;
  for (ValueId out : outputs) output_roots.insert(alias_root_[out]);
  for (ValueId v : options_.bf16_reduce) bf16_reduce_roots.insert(alias_root_.at(v));
  for (Instruction& ins : instructions_) {
    const Node& node = graph_->node(ins.node);
    const bool sum = (node.kind == OpKind::kAllReduce && allreduce_kind(node.attrs) == "sum") ||
                     node.kind == OpKind::kReduceScatter;
    if (!sum || ins.bucket >= 0 || node.dtype != DType::kF32) continue;
    ins.bf16_sum = output_roots.count(ins.node)
                       ? node.kind == OpKind::kReduceScatter && bf16_reduce_roots.count(ins.node)
                       : options_.bf16_partial_sums;
  }
}

bool Program::stored_bf16(ValueId value) const {
  TS_CHECK(value >= 0 && value < graph_->size(), "value %", value, " is not in the graph");
  return stored_bf16_[alias_root_[value]];
}

std::optional<bool> Program::gathered_in_bf16(ValueId param, int first_phase,
                                              int last_phase) const {
  TS_CHECK(param >= 0 && param < graph_->size(), "value %", param, " is not in the graph");
  const Graph& g = *graph_;
  const ValueId root = alias_root_[param];
  bool rounded = false, other = false;
  int phase = 0;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    while (phase + 1 < phase_count() && i >= phase_begin_[phase + 1]) ++phase;
    if (phase < first_phase || phase > last_phase) continue;
    const Instruction& ins = instructions_[i];
    const Node& node = g.node(ins.node);
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (alias_root_[node.inputs[k]] == root)
        (rounds_input(node, k, stored_bf16_[ins.value]) ? rounded : other) = true;
    if (ins.bias >= 0 && alias_root_[ins.bias] == root) other = true;
  }
  if (!rounded && !other) return std::nullopt;
  return stores_in_bf16(options_, rounded, other, g.node(root).dtype);
}

size_t Program::bf16_value_bytes() const {
  size_t bytes = 0;
  for (ValueId id = 0; id < graph_->size(); ++id)
    if (stored_bf16_[id] && value_buffer_[id] >= 0)
      bytes += static_cast<size_t>(graph_->node(id).shape.numel()) * sizeof(uint16_t);
  return bytes;
}

}  // namespace tessel
