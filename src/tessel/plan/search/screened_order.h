// Candidates in order of screening's estimate, estimated lazily.
//
// Given every candidate's lower bound (sorted ascending) and a function
// that estimates one, next() yields the candidate of the smallest estimate
// among those not yielded yet, estimating only as far as needed: a
// candidate is estimated once every smaller bound has been, and the best
// estimate so far is final once the next bound exceeds it (a bound is never
// above its estimate: Screener's invariant). Ties: the smaller candidate
// index first. Candidates whose estimate throws are skipped (counted).
#pragma once

#include <functional>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

namespace tessel::plan {

class ScreenedOrder {
 public:
  using Estimate = std::function<std::optional<double>(int candidate)>;  // nullopt: skipped
  ScreenedOrder(std::vector<std::pair<double, int>> sorted_bounds, Estimate estimate);

  // (estimate, candidate), or nullopt when every candidate was yielded.
  std::optional<std::pair<double, int>> next();

  int estimated() const { return estimated_; }
  int skipped() const { return skipped_; }
  // Candidates never estimated (their bound exceeded every estimate yielded).
  int unestimated() const { return static_cast<int>(bounds_.size() - position_); }

 private:
  std::vector<std::pair<double, int>> bounds_;
  Estimate estimate_;
  size_t position_ = 0;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>
      ready_;
  int estimated_ = 0, skipped_ = 0;
};

}  // namespace tessel::plan
