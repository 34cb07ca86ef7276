// expect_plan_order(result): a search's plans are fastest first, and plans
// whose steps are equal as printed come smaller peak memory first (the
// order search_plans promises, plan/search/search.h). Shared by the planner tests.
#pragma once

#include <gtest/gtest.h>

#include "tessel/plan/search/search.h"

namespace tessel::plan {

inline void expect_plan_order(const PlanResult& r) {
  for (size_t i = 1; i < r.plans.size(); ++i) {
    const StepPrediction &a = r.plans[i - 1].prediction, &b = r.plans[i].prediction;
    if (same_step_as_printed(a, b))
      EXPECT_LE(a.peak_bytes, b.peak_bytes) << "plans " << i - 1 << " and " << i;
    else
      EXPECT_LT(a.step_s, b.step_s) << "plans " << i - 1 << " and " << i;
  }
}

}  // namespace tessel::plan
