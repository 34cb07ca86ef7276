// Program::memory_breakdown: what a program's memory plan holds at its peak,
// by kind of buffer, for the dry run's report (memory_report.h). Derived from
// the same requests and plans the program allocates, so its parts add up to
// the bytes live at the peak instruction (the plan itself may be larger by
// fragmentation: `planned`).
#include <algorithm>

#include "tessel/runtime/program.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {

Program::MemoryBreakdown Program::memory_breakdown(bool phase_local) const {
  const std::vector<int>& index = phase_local ? local_index_ : arena_index_;
  // Each request's part of the breakdown.
  std::vector<size_t MemoryBreakdown::*> part(requests_.size(), &MemoryBreakdown::values);
  std::vector<ValueId> value_of(requests_.size(), -1);
  for (ValueId id = 0; id < static_cast<ValueId>(value_buffer_.size()); ++id)
    if (value_buffer_[id] >= 0) value_of[value_buffer_[id]] = id;
  for (const Offload& o : offloads_) value_of[o.buffer] = o.root;  // its backward buffer
  for (const Bf16Copy& c : bf16_copies_)
    if (c.buffer) part[*c.buffer] = &MemoryBreakdown::bf16_copies;
  for (const Instruction& ins : instructions_) {
    if (ins.stage >= 0) part[ins.stage] = &MemoryBreakdown::staging;
    if (ins.scratch >= 0) part[ins.scratch] = &MemoryBreakdown::scratch;
  }
  for (const Bucket& b : buckets_) {
    if (b.buffer) part[*b.buffer] = &MemoryBreakdown::buckets;
    if (b.work) part[*b.work] = &MemoryBreakdown::buckets;
  }
  // Live bytes per step: +bytes at first, -bytes after last.
  const int steps = std::max<int>(1, static_cast<int>(instructions_.size())) + 1;
  std::vector<int64_t> delta(steps + 1, 0);
  for (size_t r = 0; r < requests_.size(); ++r) {
    if (index[r] < 0) continue;
    const int64_t bytes = static_cast<int64_t>(round_up(std::max<size_t>(requests_[r].bytes, 1)));
    delta[requests_[r].first] += bytes;
    delta[std::min(requests_[r].last, steps - 1) + 1] -= bytes;
  }
  MemoryBreakdown out;
  out.planned = phase_local ? phase_local_bytes() : plan_.peak_bytes;
  if (phase_local) out.shared_weight_copies = shared_copy_bytes_;
  int64_t live = 0, best = 0;
  for (int step = 0; step < steps; ++step) {
    live += delta[step];
    if (live > best) best = live, out.peak_instruction = step;
  }
  if (out.peak_instruction < 0) return out;
  const int peak = out.peak_instruction;
  if (peak < static_cast<int>(instructions_.size())) out.peak_node = instructions_[peak].node;
  for (size_t r = 0; r < requests_.size(); ++r) {
    if (index[r] < 0 || requests_[r].first > peak || requests_[r].last < peak) continue;
    const size_t bytes = round_up(std::max<size_t>(requests_[r].bytes, 1));
    out.*part[r] += bytes;
    if (part[r] == &MemoryBreakdown::values && value_of[r] >= 0)
      out.largest.emplace_back(value_of[r], bytes);
  }
  std::stable_sort(out.largest.begin(), out.largest.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

}  // namespace tessel
