// Static memory plan: offsets in one arena for buffers with known lifetimes.
//
// A buffer is live over the closed interval [first, last] of instruction
// indices. Buffers whose intervals overlap never share bytes; others may
// (liveness-based reuse). The plan is computed once, before any step, and
// its `peak_bytes` is the arena size the program allocates — the memory a
// step uses for activations and gradients. Offsets are 64-byte aligned.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tessel {

struct BufferRequest {
  size_t bytes = 0;
  int first = 0;  // first instruction that writes or reads it
  int last = 0;   // last instruction that reads it
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request
  size_t peak_bytes = 0;
};

// Greedy best-fit by decreasing size: each buffer takes the lowest offset
// that does not collide with an already placed buffer whose lifetime overlaps.
MemoryPlan plan_memory(const std::vector<BufferRequest>& requests);

// Empty if the plan is valid; otherwise a description of the first pair of
// buffers that are live at the same time and overlap in memory.
std::string find_plan_conflict(const std::vector<BufferRequest>& requests, const MemoryPlan& plan);

}  // namespace tessel
