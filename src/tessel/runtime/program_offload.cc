// Program's activation offload (CompileOptions::offload_from): which values
// go to pinned host memory between their forward and backward use, their
// buffers, and the copies and pointer moves around the instructions.
//
// An offloaded value has two device buffers: the forward one, live from its
// first writer to its last forward reader, and the backward one, live from
// its reload to its last reader; and a host buffer in the program's own host
// plan, live from the copy out to the reload. Its readers and views find it
// through value_ptr_, which points at the forward buffer from the value's
// first use until its reload and at the backward buffer after, so every
// kernel reads the same bytes it would without offload.
#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/ir/op_table.h"
#include "tessel/runtime/program.h"
#include "tessel/runtime/program_uses.h"

namespace tessel {

void Program::plan_offloads(Uses& uses) {
  if (options_.offload_from < 0) return;
  const Graph& g = *graph_;
  const int count = static_cast<int>(instructions_.size());
  int begin = 0;  // the backward's first instruction
  while (begin < count && instructions_[begin].node < options_.offload_from) ++begin;
  // Per root: its last writer and last reader before the backward, and its
  // first reader in it.
  std::vector<int> written(g.size(), -1), forward_last(g.size(), -1), backward_first(g.size(), -1);
  for (int i = 0; i < count; ++i) {
    const Instruction& ins = instructions_[i];
    if (i < begin) written[alias_root_[ins.value]] = i;
    for (ValueId in : instruction_inputs(ins)) {
      const ValueId root = alias_root_[in];
      if (i < begin)
        forward_last[root] = i;
      else if (backward_first[root] < 0)
        backward_first[root] = i;
    }
  }
  std::vector<ValueId> sent;
  for (ValueId v : options_.sent_outputs) sent.push_back(alias_root_.at(v));
  std::vector<ValueId> roots;
  for (ValueId r = 0; r < g.size(); ++r)
    if (alias_root_[r] == r && written[r] >= 0 && backward_first[r] >= 0 &&
        uses.last[r] < uses.end && std::find(sent.begin(), sent.end(), r) == sent.end())
      roots.push_back(r);
  std::stable_sort(roots.begin(), roots.end(),
                   [&](ValueId a, ValueId b) { return backward_first[a] < backward_first[b]; });
  for (size_t k = 0; k < roots.size(); ++k) {
    const ValueId r = roots[k];
    Offload o;
    o.root = r;
    o.first = uses.first[r];
    o.written = written[r];
    o.reload = backward_first[roots[k == 0 ? 0 : k - 1]];
    o.last = uses.last[r];
    for (ValueId id = r; id < g.size(); ++id)
      if (alias_root_[id] == r) o.aliases.push_back(id);
    uses.last[r] = std::max(written[r], forward_last[r]);
    const int index = static_cast<int>(offloads_.size());
    instructions_[o.first].offload_before.push_back(index);
    instructions_[o.reload].offload_before.push_back(index);
    instructions_[o.written].offload_after.push_back(index);
    offloads_.push_back(std::move(o));
  }
}

// The backward buffers join the device requests; the host buffers get
// their own plan. Needs value_buffer_ (and so each value's stored size).
void Program::request_offload_buffers() {
  for (Offload& o : offloads_) {
    o.bytes = requests_.at(value_buffer_.at(o.root)).bytes;
    o.buffer = static_cast<int>(requests_.size());
    requests_.push_back({o.bytes, o.reload, o.last});
    host_requests_.push_back({o.bytes, o.written, o.reload});
  }
  host_plan_ = plan_memory(host_requests_);
}

void Program::place_offloads(const std::function<uint8_t*(int)>& address) {
  if (offloads_.empty()) return;
  host_arena_ = backend_->allocate(MemorySpace::kPinnedHost, host_plan_.peak_bytes);
  for (size_t k = 0; k < offloads_.size(); ++k) {
    Offload& o = offloads_[k];
    o.forward = address(value_buffer_[o.root]);
    o.backward = address(o.buffer);
    o.host = host_arena_.data() + host_plan_.offsets[k];
  }
}

void Program::point_offloads(const Instruction& ins, int i) {
  for (int k : ins.offload_before) {
    const Offload& o = offloads_[k];
    uint8_t* base = o.forward;
    if (i == o.reload) {
      backend_->copy(o.backward, o.host, o.bytes);
      base = o.backward;
    }
    for (ValueId id : o.aliases) value_ptr_[id] = base + alias_offset_[id];
  }
}

}  // namespace tessel
