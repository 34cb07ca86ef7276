// Kernels that write over their input: an instruction whose op table entry
// says OutputBuffer::kOwnOrFirstInput (ir/op_table.h, which states the
// kernels' contract), and whose first input's buffer dies at that
// instruction, takes that buffer for its output instead of a new one (its
// output becomes an alias of the input's root, as a view's does). The
// cross-entropy gradient is the one that pays: its output and the logits
// it reads are the largest tensors of a language model's step (rows x
// vocab each), and the logits die there, so a step's peak drops by one of
// them where it falls at the loss. This runs before bf16 storage is
// chosen: an output written over an f32 input is stored in f32 (its
// readers, einsums, round it as bf16 storage would have: the same bits).
#include <set>

#include "tessel/ir/graph.h"
#include "tessel/ir/op_table.h"
#include "tessel/runtime/program.h"
#include "tessel/runtime/program_uses.h"

namespace tessel {

void Program::write_over_dying_inputs(const std::vector<ValueId>& outputs, Uses& uses) {
  const Graph& g = *graph_;
  // Roots whose storage others see or keep: never written over.
  std::set<ValueId> kept;
  for (ValueId out : outputs) kept.insert(alias_root_[out]);
  for (ValueId v : options_.sent_outputs) kept.insert(alias_root_.at(v));
  for (ValueId v : options_.late_inputs) kept.insert(alias_root_.at(v));
  for (ValueId v : options_.accumulated_outputs) kept.insert(alias_root_.at(v));
  for (ValueId v : options_.bf16_reduce) kept.insert(alias_root_.at(v));
  for (size_t i = 0; i < instructions_.size(); ++i) {
    const Instruction& ins = instructions_[i];
    const Node& node = g.node(ins.node);
    if (ins.value != ins.node || op_info(node.kind).output != OutputBuffer::kOwnOrFirstInput)
      continue;
    const ValueId in = node.inputs[0];
    const ValueId root = alias_root_[in];
    const Node& source = g.node(root);
    const bool dies_here = uses.last[root] == static_cast<int>(i);
    // Element i of the output is element i of the input (same dims in the
    // same order), which covers its whole root.
    const bool whole_root = alias_offset_[in] == 0 && g.node(in).shape == node.shape &&
                            source.shape.numel() == node.shape.numel() &&
                            source.dtype == node.dtype && g.node(in).dtype == node.dtype;
    const bool computed = !is_leaf(source) && !is_tuple(source);
    if (!dies_here || !whole_root || !computed || kept.count(root) || kept.count(ins.value))
      continue;
    // The output and every view of it now live in the input's buffer.
    const ValueId out = ins.value;
    for (ValueId id = out; id < g.size(); ++id)
      if (alias_root_[id] == out) alias_root_[id] = root;
    uses.last[root] = uses.last[out];
    uses.read[root] = uses.read[root] || uses.read[out];
    uses.first[out] = uses.last[out] = -1;
    uses.read[out] = false;
  }
}

}  // namespace tessel
