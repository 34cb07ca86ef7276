// simulate_schedule: a unit-cost clock per rank; a recv waits for the time
// its matching send was issued. Runs only checked schedules, so every recv
// eventually finds its send and the loop ends.
#include <algorithm>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/schedule/schedule_check.h"
#include "tessel/schedule/transfer.h"

namespace tessel {
double action_cost(ActionKind k, const UnitCosts& c) {
  switch (k) {
    case ActionKind::kForward:
      return c.forward;
    case ActionKind::kBackward:
      return c.backward_input + c.backward_weight;
    case ActionKind::kBackwardInput:
      return c.backward_input;
    case ActionKind::kBackwardWeight:
      return c.backward_weight;
    default:
      return 0;
  }
}

SimulatedTimeline simulate_schedule(const Schedule& s, UnitCosts costs) {
  if (costs.forward < 0 || costs.backward_input < 0 || costs.backward_weight < 0)
    TS_THROW("simulate_schedule: unit costs must be >= 0, got forward=", costs.forward,
             " backward_input=", costs.backward_input, " backward_weight=", costs.backward_weight);
  return simulate_schedule(
      s,
      ActionCosts{[costs](int, const Action& a) { return action_cost(a.kind, costs); }, nullptr});
}

SimulatedTimeline simulate_schedule(const Schedule& s, const ActionCosts& costs) {
  TS_CHECK(costs.compute, "simulate_schedule: a compute cost function is required");
  check_schedule(s);
  return simulate_checked_schedule(s, costs);
}

SimulatedTimeline simulate_checked_schedule(const Schedule& s, const ActionCosts& costs) {
  TS_CHECK(costs.compute, "simulate_schedule: a compute cost function is required");
  SimulatedTimeline out;
  std::vector<double> clock(s.ranks, 0), busy(s.ranks, 0);
  std::vector<int> next(s.ranks, 0);
  // When each message was sent, by (direction, source stage, micro-batch):
  // a checked schedule's transfers name stages and micro-batches in range.
  const size_t stages = static_cast<size_t>(s.stages());
  const size_t microbatches = static_cast<size_t>(s.microbatches);
  auto slot = [&](const Transfer& t) {
    TS_CHECK(t.src_stage >= 0 && static_cast<size_t>(t.src_stage) < stages && t.microbatch >= 0 &&
                 static_cast<size_t>(t.microbatch) < microbatches,
             "simulate_schedule: schedule '", s.name, "' was not checked (a transfer from stage ",
             t.src_stage, " micro-batch ", t.microbatch, ")");
    return ((t.gradient ? stages : 0) + static_cast<size_t>(t.src_stage)) * microbatches +
           static_cast<size_t>(t.microbatch);
  };
  std::vector<double> sent_at(2 * stages * microbatches, 0);
  std::vector<char> sent(sent_at.size(), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < s.ranks; ++r) {
      const std::vector<Action>& list = s.actions[r];
      for (; next[r] < static_cast<int>(list.size()); ++next[r], moved = true) {
        const Action& a = list[next[r]];
        if (a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kSendGradient) {
          const size_t k = slot(transfer_of(s, r, next[r]));
          sent_at[k] = clock[r] + (costs.transfer ? costs.transfer(r, a) : 0.0);
          sent[k] = 1;
        } else if (is_communication(a.kind)) {
          const size_t k = slot(transfer_of(s, r, next[r]));
          if (!sent[k]) break;
          clock[r] = std::max(clock[r], sent_at[k]);
        } else if (is_compute(a.kind)) {
          const double start = clock[r];
          const double cost = costs.compute(r, a);
          if (cost < 0)
            TS_THROW("simulate_schedule: negative cost ", cost, " for ",
                     describe_action(s, r, next[r]));
          clock[r] += cost;
          busy[r] += clock[r] - start;
          out.events.push_back({r, a, start, clock[r]});
          out.makespan = std::max(out.makespan, clock[r]);
        }
      }
    }
  }
  for (int r = 0; r < s.ranks; ++r)
    TS_CHECK(next[r] == static_cast<int>(s.actions[r].size()), "schedule '", s.name,
             "' stalled on rank ", r, " after passing check_schedule");
  std::stable_sort(out.events.begin(), out.events.end(),
                   [](const SimulatedTimeline::Event& a, const SimulatedTimeline::Event& b) {
                     return a.start != b.start ? a.start < b.start : a.rank < b.rank;
                   });
  for (int r = 0; r < s.ranks; ++r)
    out.bubble_fraction.push_back(out.makespan > 0 ? 1 - busy[r] / out.makespan : 0);
  return out;
}

}  // namespace tessel
