#include "tessel/plan/model/co_run.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace tessel::plan {
namespace {

// The share of [start, end) covered by the union of `others` (intervals).
double covered_share(double start, double end,
                     const std::vector<std::pair<double, double>>& others) {
  if (end <= start) return 0;
  std::vector<std::pair<double, double>> in;
  for (const auto& [a, b] : others)
    if (b > start && a < end) in.emplace_back(std::max(a, start), std::min(b, end));
  std::sort(in.begin(), in.end());
  double covered = 0, reach = start;
  for (const auto& [a, b] : in) {
    if (b <= reach) continue;
    covered += b - std::max(a, reach);
    reach = b;
  }
  return covered / (end - start);
}

}  // namespace

std::map<CoRunKey, double> co_run_factors(const SimulatedTimeline& timeline, int ranks,
                                          const PipelineCoRun& co) {
  std::vector<std::vector<std::pair<double, double>>> busy_of(ranks);
  for (const SimulatedTimeline::Event& e : timeline.events)
    busy_of[e.rank].emplace_back(e.start, e.end);
  std::map<CoRunKey, double> factors;
  for (const SimulatedTimeline::Event& e : timeline.events) {
    std::vector<std::pair<double, double>> others;
    for (int q = 0; q < ranks; ++q)
      if (q != e.rank) others.insert(others.end(), busy_of[q].begin(), busy_of[q].end());
    const double o = covered_share(e.start, e.end, others);
    factors[co_run_key(e.rank, e.action)] = co.polling + (co.computing - co.polling) * o;
  }
  return factors;
}

}  // namespace tessel::plan
