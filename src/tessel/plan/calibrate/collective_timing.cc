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
      comm.all_reduce(in, floats, ReduceKind::kSum, "calibrate");
      return;
    case CollectiveKind::kAllGather:
      comm.all_gather(in, out, floats, "calibrate");
      return;
    case CollectiveKind::kReduceScatter:
      TS_CHECK(floats % p == 0, floats, " floats over ", p, " ranks");
      comm.reduce_scatter(in, out, floats / p, "calibrate");
      return;
    case CollectiveKind::kAllToAll:
      TS_CHECK(floats % p == 0, floats, " floats over ", p, " ranks");
      comm.all_to_all(in, out, floats / p, "calibrate");
      return;
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
