// What the planner says when no plan fits the memory limit: the smallest
// peak it costed, with that plan's knobs, and which knobs would lower it
// (those the request fixed named as such), then how to see the plans
// anyway (--ignore-device-memory, or a higher --memory-limit).
#pragma once

#include <cstdint>
#include <string>

#include "tessel/plan/search/search.h"

namespace tessel::plan {

struct NoFit {
  int considered = 0, exact = 0;  // candidates generated, and costed exactly
  bool screened = false;          // the exact ones were the best few by screening's estimate
  int64_t limit = 0;              // bytes per rank
  bool limit_is_device = false;   // the device's memory (not --memory-limit)
  bool offload_helps = false;     // host memory is not the device's (a cluster file)
  TrainConfig smallest;           // the exactly costed plan of the smallest peak
  int64_t smallest_peak = 0;
};

std::string no_fit_message(const PlanRequest& request, const NoFit& n);

}  // namespace tessel::plan
