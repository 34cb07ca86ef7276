// The GEMM grid's shapes (plan/calibrate/calibrate_compute.h): each grid point is
// measured with three variants around it, so one shape's quirk (a square
// power-of-two cube) does not price its neighbourhood. What is asserted: the
// variants are near the point in the grid's coordinates, differ from it and
// from each other, keep small dims, and stay on multiples of 8. A repeated
// memory measurement raises each rate only where it is faster. No timing.
#include "tessel/plan/calibrate/calibrate_compute.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

#include "tessel/plan/profile/gemm_grid.h"

namespace tessel::plan {
namespace {

TEST(CalibrateCompute, EveryGridPointIsMeasuredWithThreeNearbyVariants) {
  for (bool quick : {false, true}) {
    for (const GemmPoint& p : calibration_gemm_shapes(quick)) {
      const std::vector<GemmPoint> v = calibration_gemm_variants(p);
      ASSERT_EQ(v.size(), 4u);
      EXPECT_EQ(std::make_tuple(v[0].batch, v[0].m, v[0].n, v[0].k),
                std::make_tuple(p.batch, p.m, p.n, p.k));
      std::set<std::tuple<int64_t, int64_t, int64_t>> distinct;
      for (const GemmPoint& q : v) {
        distinct.insert({q.m, q.n, q.k});
        EXPECT_EQ(q.batch, p.batch);
        EXPECT_EQ(q.threads, p.threads);
        // About the point's FLOPs (within 1/8 each way on two dims) and aspect.
        EXPECT_LT(std::abs(gemm_log_flops(q.m, q.n, q.k) - gemm_log_flops(p.m, p.n, p.k)), 0.2);
        EXPECT_LT(std::abs(gemm_log_aspect(q.m, q.n, q.k) - gemm_log_aspect(p.m, p.n, p.k)), 0.3);
        for (auto [dq, dp] : {std::pair{q.m, p.m}, {q.n, p.n}, {q.k, p.k}}) {
          if (dp < 32) {
            EXPECT_EQ(dq, dp);  // small dims (attention's 16, 4) unchanged
          } else {
            EXPECT_EQ(dq % 8, 0) << dq;
          }
        }
      }
      // With at least two dims of 32 or more, the four shapes are distinct.
      const int large = (p.m >= 32) + (p.n >= 32) + (p.k >= 32);
      if (large >= 2) {
        EXPECT_EQ(distinct.size(), 4u) << p.m << "x" << p.n << "x" << p.k;
      }
    }
  }
  // The case that motivated it: 512^3 is measured with no dim at 512 in two
  // of its variants' moved pair.
  const std::vector<GemmPoint> cube = calibration_gemm_variants({1, 1, 512, 512, 512, 0});
  EXPECT_EQ(std::make_tuple(cube[1].m, cube[1].n, cube[1].k), std::make_tuple(576, 448, 512));
  EXPECT_EQ(std::make_tuple(cube[2].m, cube[2].n, cube[2].k), std::make_tuple(512, 576, 448));
  EXPECT_EQ(std::make_tuple(cube[3].m, cube[3].n, cube[3].k), std::make_tuple(448, 512, 576));
}

TEST(CalibrateCompute, ARepeatedMemoryMeasurementKeepsEachRatesFasterFigure) {
  MemoryRate first{2, 40.0, 30.0, 1.5};
  keep_faster(first, MemoryRate{2, 20.0, 35.0, 1.5});
  EXPECT_EQ(first.elementwise_gbs, 40.0);
  EXPECT_EQ(first.row_gbs, 35.0);
  EXPECT_EQ(first.philox_gdraws, 1.5);
  EXPECT_THROW(keep_faster(first, MemoryRate{1, 50.0, 50.0, 2.0}), Error);
  EXPECT_EQ(first.elementwise_gbs, 40.0);
}

}  // namespace
}  // namespace tessel::plan
