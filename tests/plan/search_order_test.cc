// The order of the planner's plans (plan/search/search.h's ranks_before):
// steps equal as `tessel plan` prints them (0.01 ms) tie, and the smaller
// peak memory ranks first, then the order of generation.
#include <gtest/gtest.h>

#include "tessel/plan/search/search.h"

namespace tessel::plan {
namespace {

StepPrediction step_of(double step_s, int64_t peak_bytes) {
  StepPrediction p;
  p.step_s = step_s;
  p.peak_bytes = peak_bytes;
  return p;
}

TEST(PlanOrder, StepsEqualAsPrintedRankTheSmallerMemoryFirst) {
  // 11.781 ms and 11.7811 ms print as 11.78: the 4 MiB plan ranks first.
  const StepPrediction fast_big = step_of(11.7810e-3, 8 << 20),
                       slow_small = step_of(11.7811e-3, 4 << 20);
  EXPECT_TRUE(same_step_as_printed(fast_big, slow_small));
  EXPECT_TRUE(ranks_before(slow_small, 1, fast_big, 0));
  EXPECT_FALSE(ranks_before(fast_big, 0, slow_small, 1));
  // Same step and memory: the order of generation.
  EXPECT_TRUE(ranks_before(fast_big, 0, fast_big, 1));
  EXPECT_FALSE(ranks_before(fast_big, 1, fast_big, 0));
  // Steps that differ as printed: the faster first, whatever its memory.
  const StepPrediction faster = step_of(11.76e-3, 8 << 20);
  EXPECT_FALSE(same_step_as_printed(faster, slow_small));
  EXPECT_TRUE(ranks_before(faster, 1, slow_small, 0));
}

}  // namespace
}  // namespace tessel::plan
