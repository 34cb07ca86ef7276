#include "tessel/passes/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "tessel/base/error.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {
namespace {

bool lifetimes_overlap(const BufferRequest& a, const BufferRequest& b) {
  return a.first <= b.last && b.first <= a.last;
}

}  // namespace

MemoryPlan plan_memory(const std::vector<BufferRequest>& requests) {
  const size_t n = requests.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });

  MemoryPlan plan;
  plan.offsets.assign(n, 0);
  // Placed buffers, kept sorted by [begin, end): the conflicting ones come
  // out in order, with no sort per buffer.
  struct Placed {
    std::pair<size_t, size_t> range;  // [begin, end)
    BufferRequest request;
    bool operator<(const Placed& o) const { return range < o.range; }
  };
  std::vector<Placed> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of conflicting buffers, sorted
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    TS_CHECK(r.first <= r.last, "buffer ", idx, " dies before it is born");
    size_t bytes = round_up(std::max<size_t>(r.bytes, 1));
    busy.clear();
    for (const Placed& p : placed)
      if (lifetimes_overlap(r, p.request)) busy.push_back(p.range);
    // Best fit: the smallest gap that holds the buffer; else after the last.
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [begin, end] : busy) {
      if (begin > cursor && begin - cursor >= bytes && begin - cursor < best_gap) {
        best = cursor;
        best_gap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    if (best == SIZE_MAX) best = cursor;
    plan.offsets[idx] = best;
    plan.peak_bytes = std::max(plan.peak_bytes, best + bytes);
    const Placed entry{{best, best + bytes}, r};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), entry), entry);
  }
  return plan;
}

std::string find_plan_conflict(const std::vector<BufferRequest>& requests, const MemoryPlan& plan) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (plan.offsets[i] % AlignedBuffer::kAlignment != 0)
      return str_cat("buffer ", i, " at offset ", plan.offsets[i], " is not aligned");
    if (plan.offsets[i] + requests[i].bytes > plan.peak_bytes)
      return str_cat("buffer ", i, " ends past the arena (", plan.peak_bytes, " bytes)");
    for (size_t j = i + 1; j < requests.size(); ++j) {
      if (!lifetimes_overlap(requests[i], requests[j])) continue;
      size_t a0 = plan.offsets[i], a1 = a0 + requests[i].bytes;
      size_t b0 = plan.offsets[j], b1 = b0 + requests[j].bytes;
      if (a0 < b1 && b0 < a1)
        return str_cat("buffers ", i, " [", a0, ",", a1, ") live [", requests[i].first, ",",
                       requests[i].last, "] and ", j, " [", b0, ",", b1, ") live [",
                       requests[j].first, ",", requests[j].last, "] overlap");
    }
  }
  return "";
}

}  // namespace tessel
