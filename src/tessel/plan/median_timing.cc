#include "tessel/plan/median_timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace tessel::plan {

double median_seconds(double min_seconds, int min_runs, const std::function<void()>& fn) {
  fn();  // warm-up
  std::vector<double> runs;
  double total = 0;
  while (static_cast<int>(runs.size()) < min_runs || total < min_seconds) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    total += runs.back();
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

AlignedBuffer filled_floats(int64_t floats) {
  AlignedBuffer buf(static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float));
  float* p = buf.as<float>();
  for (int64_t i = 0; i < floats; ++i) p[i] = 0.001f * static_cast<float>(i % 997);
  return buf;
}

}  // namespace tessel::plan
