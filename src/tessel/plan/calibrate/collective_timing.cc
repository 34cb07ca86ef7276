#include "tessel/plan/calibrate/collective_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"

namespace tessel::plan {

void run_collective(Communicator& comm, CollectiveKind kind, float* in, float* out,
                    int64_t floats) {
  const int64_t p = comm.size();
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return comm.all_reduce(in, floats, ReduceKind::kSum, "calibrate");
    case CollectiveKind::kAllGather:
      return comm.all_gather(in, out, floats, "calibrate");
    case CollectiveKind::kReduceScatter:
      TS_CHECK(floats % p == 0, floats, " floats over ", p, " ranks");
      return comm.reduce_scatter(in, out, floats / p, "calibrate");
    case CollectiveKind::kAllToAll:
      TS_CHECK(floats % p == 0, floats, " floats over ", p, " ranks");
      return comm.all_to_all(in, out, floats / p, "calibrate");
  }
}

double median_seconds(const std::function<void()>& barrier, int iterations,
                      const std::function<void()>& fn) {
  TS_CHECK(iterations >= 1, "iterations ", iterations);
  barrier();
  fn();  // warm-up
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    barrier();
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(seconds_since(start));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace tessel::plan
