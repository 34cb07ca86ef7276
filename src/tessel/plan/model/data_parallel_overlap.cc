#include "tessel/plan/model/data_parallel_overlap.h"

#include <algorithm>

namespace tessel::plan {

OverlappedDataWork overlapped_data_work(std::vector<ChunkDataWork> chunks, double makespan_s) {
  OverlappedDataWork out;
  // Reductions on one channel, in the order the chunks' gradients complete.
  std::sort(chunks.begin(), chunks.end(), [](const ChunkDataWork& a, const ChunkDataWork& b) {
    return a.grads_ready_s < b.grads_ready_s;
  });
  double channel = 0;
  for (const ChunkDataWork& c : chunks) {
    channel = std::max(channel, c.grads_ready_s) + c.reduce_s;
    out.comm_s += c.reduce_s + c.gather_s;
  }
  out.reduce_exposed_s = std::max(0.0, channel - makespan_s);
  // Gathers from the update on, in the order of first use; delaying the
  // whole next schedule by `delay` moves every deadline by as much.
  std::sort(chunks.begin(), chunks.end(), [](const ChunkDataWork& a, const ChunkDataWork& b) {
    return a.first_forward_s < b.first_forward_s;
  });
  double gathered = 0, delay = 0;
  for (const ChunkDataWork& c : chunks) {
    gathered += c.gather_s;
    delay = std::max(delay, gathered - c.first_forward_s);
  }
  out.gather_exposed_s = delay;
  return out;
}

}  // namespace tessel::plan
