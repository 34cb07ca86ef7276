// Ring attention's balanced order (sharding/context_parallel.h) on 1 to 8
// ranks: every half of the 2n is computed by exactly one rank's slot in
// each order, the places invert the halves, every rank's causal work is the
// same at every ring step (two half pairs, a masked diagonal counting half)
// where the contiguous order gives some rank a whole chunk pair (four), and
// ring_halves_moved counts the halves that leave a rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tessel/sharding/context_parallel.h"

namespace tessel {
namespace {

// The causal work of rank r's queries against owner's keys, in half pairs.
template <class HalfOf>
double step_work(int rank, int owner, HalfOf half_of) {
  double work = 0;
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      const int q = half_of(rank, a), k = half_of(owner, b);
      work += k < q ? 1.0 : k == q ? 0.5 : 0.0;
    }
  return work;
}

TEST(RingBalance, EveryHalfHasOnePlaceInEachOrder) {
  for (int n = 1; n <= 8; ++n) {
    std::set<int> balanced, contiguous;
    for (int r = 0; r < n; ++r)
      for (int s = 0; s < 2; ++s) {
        const int b = half_at(HalfOrder::kBalanced, r, n, s),
                  c = half_at(HalfOrder::kContiguous, r, n, s);
        balanced.insert(b);
        contiguous.insert(c);
        EXPECT_EQ(place_of(HalfOrder::kBalanced, b, n).rank, r) << n;
        EXPECT_EQ(place_of(HalfOrder::kBalanced, b, n).slot, s) << n;
        EXPECT_EQ(place_of(HalfOrder::kContiguous, c, n).rank, r) << n;
        EXPECT_EQ(place_of(HalfOrder::kContiguous, c, n).slot, s) << n;
      }
    EXPECT_EQ(balanced.size(), 2u * n);
    EXPECT_EQ(*balanced.rbegin(), 2 * n - 1);
    EXPECT_EQ(contiguous, balanced);
  }
}

TEST(RingBalance, EveryRankDoesTheSameCausalWorkAtEveryStep) {
  for (int n = 2; n <= 8; ++n)
    for (int t = 0; t < n; ++t) {
      double slowest_contiguous = 0;
      for (int r = 0; r < n; ++r) {
        const int owner = (r - t + n) % n;
        EXPECT_EQ(
            step_work(r, owner,
                      [n](int rank, int s) { return half_at(HalfOrder::kBalanced, rank, n, s); }),
            2.0)
            << n << " ranks, rank " << r << ", step " << t;
        slowest_contiguous = std::max(slowest_contiguous, step_work(r, owner, [n](int rank, int s) {
                                        return half_at(HalfOrder::kContiguous, rank, n, s);
                                      }));
      }
      EXPECT_EQ(slowest_contiguous, t == 0 ? 2.0 : 4.0) << n << " ranks, step " << t;
    }
}

TEST(RingBalance, CountsTheHalvesThatLeaveARank) {
  EXPECT_EQ(ring_halves_moved(0, 1), 0);
  EXPECT_EQ(ring_halves_moved(0, 2), 1);  // keeps half 0, sends half 1
  EXPECT_EQ(ring_halves_moved(1, 2), 1);  // keeps half 2, sends half 3
  const int four[] = {1, 2, 1, 2};        // rank 2 keeps half 5
  for (int r = 0; r < 4; ++r) EXPECT_EQ(ring_halves_moved(r, 4), four[r]) << r;
  for (int r = 0; r < 3; ++r) EXPECT_EQ(ring_halves_moved(r, 3), r == 0 ? 1 : 2) << r;
}

}  // namespace
}  // namespace tessel
