#include "tessel/plan/search/screened_order.h"

namespace tessel::plan {

ScreenedOrder::ScreenedOrder(std::vector<std::pair<double, int>> sorted_bounds, Estimate estimate)
    : bounds_(std::move(sorted_bounds)), estimate_(std::move(estimate)) {}

std::optional<std::pair<double, int>> ScreenedOrder::next() {
  while (position_ < bounds_.size() &&
         (ready_.empty() || bounds_[position_].first <= ready_.top().first)) {
    const int candidate = bounds_[position_++].second;
    const std::optional<double> e = estimate_(candidate);
    if (!e) {
      ++skipped_;
      continue;
    }
    ++estimated_;
    ready_.push({*e, candidate});
  }
  if (ready_.empty()) return std::nullopt;
  const std::pair<double, int> top = ready_.top();
  ready_.pop();
  return top;
}

}  // namespace tessel::plan
