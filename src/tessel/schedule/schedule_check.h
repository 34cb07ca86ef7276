// check_schedule proves a schedule can run and computes what it holds;
// simulate_schedule times it with unit costs.
//
// check_schedule throws an Error naming the rank, the action index, its kind,
// micro-batch and stage on the first problem it finds, in this order:
//   1. fields out of range (chunk, micro-batch, peer; BI/BW without
//      split_backward, B with it; a step's micro-batch: -1 when synchronous,
//      the last micro-batch it applies when asynchronous);
//   2. a send or recv whose peer is not the rank holding the neighbouring
//      stage, or without exactly one matching recv / send (same direction,
//      source stage, destination stage, micro-batch);
//   3. compute missing or duplicated: each (stage, micro-batch) has exactly
//      one F and one B, or (split_backward) one BI and one BW;
//   4. order on a rank: F before B/BI, BI before BW, recv before the compute
//      that consumes it, send after the compute that produces it — together
//      with 5 this makes stage k's F(i) wait for stage k-1's F(i) and its
//      B/BI(i) for stage k+1's B/BI(i);
//   5. optimizer steps: synchronous ranks end with exactly one step after all
//      their compute; asynchronous steps name increasing micro-batches ending
//      with m-1, and each backward (B, or BW) lies between the step before
//      and the step that applies it;
//   6. deadlock: running the lists with buffered sends and blocking recvs
//      must finish; otherwise the error lists every rank's stuck action.
// Thread-safe. check_schedule keeps the reports of the last few schedules
// it passed and answers an equal schedule (every action) from them.
#pragma once

#include <functional>
#include <vector>

#include "tessel/schedule/schedule.h"

namespace tessel {

struct ScheduleReport {
  // Per rank: the most (micro-batch, chunk) units at once whose F ran and
  // whose last backward action (B, or BW when split) has not.
  std::vector<int> peak_in_flight;
  // Per rank: the most weight versions needed at once — the current one plus
  // those the in-flight units' forwards used (stashed for their backward).
  // 1 for synchronous schedules; p - r on rank r for pipedream once m is
  // large enough; at most 2 for 2bw. "xpipe" forwards on predicted weights
  // and stashes nothing, so the checker (knowing it by name) reports 1.
  std::vector<int> weight_versions;
};

ScheduleReport check_schedule(const Schedule& s);

// Cost of one action. B costs backward_input + backward_weight. For
// "interleaved" a chunk holds 1/v of a rank's layers: divide by v to compare
// makespans with v = 1 schedules (fractions do not change).
struct UnitCosts {
  double forward = 1, backward_input = 1, backward_weight = 1;
};

// The cost of one action of `kind` from per-phase costs: F forward, BI and
// BW their own, B both, anything else 0.
double action_cost(ActionKind kind, const UnitCosts& costs);

struct SimulatedTimeline {
  struct Event {
    int rank;
    Action action;
    double start, end;
  };
  std::vector<Event> events;            // compute actions only, by start time then rank
  double makespan = 0;                  // end of the last action on any rank
  std::vector<double> bubble_fraction;  // per rank: 1 - busy / makespan
};

// Runs the schedule on a simulated clock: each compute action starts when its
// rank is free and, after a recv, once the matching send was issued; a send
// is issued when its rank reaches it (right after the producing compute).
// Sends, recvs and optimizer steps take no time. Checks the schedule first
// (throws as check_schedule does) and throws for a negative cost.
SimulatedTimeline simulate_schedule(const Schedule& s, UnitCosts costs = {});

// The same clock with a cost per action: `compute(rank, action)` for F, B,
// BI and BW (seconds, >= 0), and `transfer(rank, action)` for a send (the
// time from its issue until the matching recv can complete; 0 if empty).
// The planner's cost model times pipelines this way (plan/model/cost_model.h).
struct ActionCosts {
  std::function<double(int rank, const Action& action)> compute;
  std::function<double(int rank, const Action& action)> transfer;
};
SimulatedTimeline simulate_schedule(const Schedule& s, const ActionCosts& costs);
// The same without the check, for a schedule the caller knows passes
// check_schedule (one equal to a schedule it checked before: the planner's
// screening simulates each make_schedule result many times with other
// costs). An unchecked schedule may throw or time a schedule that cannot run.
SimulatedTimeline simulate_checked_schedule(const Schedule& s, const ActionCosts& costs);

}  // namespace tessel
