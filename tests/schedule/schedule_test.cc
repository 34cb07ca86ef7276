// Pipeline schedules: every named schedule passes the checker for a grid of
// sizes, has the in-flight counts, weight versions and simulated bubbles the
// papers give (formulas stated beside each check), and hand-broken schedules
// and bad arguments are rejected with errors naming the rank and action.
#include "tessel/schedule/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "common/error_of.h"
#include "tessel/schedule/communication.h"
#include "tessel/schedule/schedule_check.h"

namespace tessel {
namespace {

struct Config {
  std::string name;
  int p, m, v;
};

// Every name, p in {2, 4}, m in {2, 4, 8}; interleaved with v = 2 where m % p == 0.
std::vector<Config> grid() {
  std::vector<Config> out;
  for (const std::string& name : schedule_names())
    for (int p : {2, 4})
      for (int m : {2, 4, 8}) {
        const int v = name == "interleaved" ? 2 : 1;
        if (v == 2 && m % p != 0) continue;
        out.push_back({name, p, m, v});
      }
  return out;
}

std::string label(const Config& c) { return str_cat(c.name, " p=", c.p, " m=", c.m, " v=", c.v); }

std::vector<Action> compute_only(const std::vector<Action>& list) {
  std::vector<Action> out;
  for (const Action& a : list)
    if (is_compute(a.kind)) out.push_back(a);
  return out;
}

// Per rank: the most micro-batches whose F ran and whose B / BI has not
// (the activations a stage keeps whole).
std::vector<int> peak_forward_to_input_grad(const Schedule& s) {
  std::vector<int> out;
  for (const std::vector<Action>& list : s.actions) {
    int now = 0, peak = 0;
    for (const Action& a : list) {
      if (a.kind == ActionKind::kForward) ++now;
      if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput) --now;
      peak = std::max(peak, now);
    }
    out.push_back(peak);
  }
  return out;
}

double bubble_1f1b(int p, int m) { return double(p - 1) / (m + p - 1); }

TEST(ScheduleGrid, CoversEveryNameAndPassesTheChecker) {
  const std::vector<Config> configs = grid();
  ASSERT_EQ(configs.size(), 6u * 6u + 5u);
  std::set<std::string> seen;
  for (const Config& c : configs) {
    SCOPED_TRACE(label(c));
    Schedule s = make_schedule(c.name, c.p, c.m, c.v);
    EXPECT_EQ(s.name, c.name);
    EXPECT_EQ(s.stages(), c.p * c.v);
    ASSERT_EQ(s.actions.size(), size_t(c.p));
    ScheduleReport report = check_schedule(s);
    EXPECT_EQ(report.peak_in_flight.size(), size_t(c.p));
    EXPECT_EQ(report.weight_versions.size(), size_t(c.p));
    size_t compute = 0;
    for (const auto& list : s.actions) compute += compute_only(list).size();
    EXPECT_EQ(compute, size_t(c.m * c.p * c.v * (s.split_backward ? 3 : 2)));
    seen.insert(c.name);
  }
  EXPECT_EQ(seen.size(), schedule_names().size());
}

TEST(ScheduleGrid, CommunicationIsExactlyTheSharedHelpersOutput) {
  for (const Config& c : grid()) {
    SCOPED_TRACE(label(c));
    Schedule s = make_schedule(c.name, c.p, c.m, c.v);
    Schedule stripped = s;
    size_t comm = 0;
    for (auto& list : stripped.actions) {
      auto is_comm = [](const Action& a) { return is_communication(a.kind); };
      comm += std::count_if(list.begin(), list.end(), is_comm);
      list.erase(std::remove_if(list.begin(), list.end(), is_comm), list.end());
    }
    // One send and one recv per micro-batch and stage boundary, each way.
    EXPECT_EQ(comm, size_t(4 * c.m * (c.p * c.v - 1)));
    insert_communication(stripped);
    EXPECT_EQ(stripped.actions, s.actions);
  }
}

TEST(ScheduleGrid, SimulatedDependenciesHold) {
  for (const Config& c : grid()) {
    SCOPED_TRACE(label(c));
    Schedule s = make_schedule(c.name, c.p, c.m, c.v);
    SimulatedTimeline t = simulate_schedule(s);
    std::map<std::tuple<ActionKind, int, int>, SimulatedTimeline::Event> by_key;
    for (const auto& e : t.events)
      by_key[{e.action.kind, s.stage_of(e.rank, e.action.chunk), e.action.microbatch}] = e;
    const ActionKind back = s.split_backward ? ActionKind::kBackwardInput : ActionKind::kBackward;
    for (int k = 0; k < s.stages(); ++k)
      for (int i = 0; i < c.m; ++i) {
        const auto& f = by_key.at({ActionKind::kForward, k, i});
        const auto& b = by_key.at({back, k, i});
        EXPECT_GE(b.start, f.end);
        if (k > 0) {
          EXPECT_GE(f.start, by_key.at({ActionKind::kForward, k - 1, i}).end);
        }
        if (k + 1 < s.stages()) {
          EXPECT_GE(b.start, by_key.at({back, k + 1, i}).end);
        }
        if (s.split_backward) {
          EXPECT_GE(by_key.at({ActionKind::kBackwardWeight, k, i}).start, b.end);
        }
      }
    // No rank runs two things at once.
    std::vector<double> free_at(c.p, 0);
    for (const auto& e : t.events) {
      EXPECT_GE(e.start, free_at[e.rank]);
      free_at[e.rank] = e.end;
    }
    EXPECT_DOUBLE_EQ(t.makespan, *std::max_element(free_at.begin(), free_at.end()));
  }
}

// NCCL matches a pair's messages by order, not by tag: for every schedule,
// each rank must receive from a peer in the order that peer sends to it
// (an activation or a gradient, of one stage and micro-batch), merging
// both directions' kinds into one stream per ordered pair.
TEST(ScheduleGrid, EveryPairReceivesInTheOrderItWasSent) {
  for (const Config& c : grid()) {
    const Schedule s = make_schedule(c.name, c.p, c.m, c.v);
    // (from, to) -> messages in order: (activation?, sender's stage, micro-batch).
    std::map<std::pair<int, int>, std::vector<std::tuple<bool, int, int>>> sent, received;
    for (int r = 0; r < c.p; ++r)
      for (const Action& a : s.actions[r]) {
        const bool activation =
            a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kRecvActivation;
        const int stage = s.stage_of(r, a.chunk);
        if (a.kind == ActionKind::kSendActivation || a.kind == ActionKind::kSendGradient)
          sent[{r, a.peer}].push_back({activation, stage, a.microbatch});
        if (a.kind == ActionKind::kRecvActivation)
          received[{a.peer, r}].push_back({true, stage - 1, a.microbatch});
        if (a.kind == ActionKind::kRecvGradient)
          received[{a.peer, r}].push_back({false, stage + 1, a.microbatch});
      }
    EXPECT_FALSE(sent.empty()) << label(c);
    EXPECT_EQ(sent, received) << label(c);
  }
}

TEST(ScheduleGpipe, AllForwardsThenAllBackwards) {
  Schedule s = make_schedule("gpipe", 3, 4);
  for (const auto& list : s.actions) {
    std::vector<Action> order = compute_only(list);
    ASSERT_EQ(order.size(), 8u);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(order[i], (Action{ActionKind::kForward, i}));
      EXPECT_EQ(order[4 + i], (Action{ActionKind::kBackward, i}));
    }
    EXPECT_EQ(list.back(), (Action{ActionKind::kOptimizerStep, -1}));
  }
}

TEST(ScheduleGpipe, HoldsEveryMicroBatchAndHasTheGpipeBubble) {
  for (const Config& c : grid()) {
    if (c.name != "gpipe") continue;
    SCOPED_TRACE(label(c));
    Schedule s = make_schedule(c.name, c.p, c.m);
    ScheduleReport report = check_schedule(s);
    for (int r = 0; r < c.p; ++r) {
      EXPECT_EQ(report.peak_in_flight[r], c.m);
      EXPECT_EQ(report.weight_versions[r], 1);
    }
    SimulatedTimeline t = simulate_schedule(s, {1, 1, 1});
    EXPECT_NEAR(t.makespan, 3.0 * (c.m + c.p - 1), 1e-12);
    for (double b : t.bubble_fraction) EXPECT_NEAR(b, bubble_1f1b(c.p, c.m), 1e-12);
  }
}

TEST(Schedule1f1b, WarmupThenPairsThenDrain) {
  Schedule s = make_schedule("1f1b", 4, 8);
  // Rank 1: two warm-up forwards, six (F, B) pairs, two drain backwards.
  std::vector<Action> order = compute_only(s.actions[1]);
  ASSERT_EQ(order.size(), 16u);
  EXPECT_EQ(order[0], (Action{ActionKind::kForward, 0}));
  EXPECT_EQ(order[1], (Action{ActionKind::kForward, 1}));
  for (int k = 0; k < 6; ++k) {
    EXPECT_EQ(order[2 + 2 * k], (Action{ActionKind::kForward, 2 + k}));
    EXPECT_EQ(order[3 + 2 * k], (Action{ActionKind::kBackward, k}));
  }
  EXPECT_EQ(order[14], (Action{ActionKind::kBackward, 6}));
  EXPECT_EQ(order[15], (Action{ActionKind::kBackward, 7}));
}

TEST(Schedule1f1b, InFlightIsPMinusRankAndBubbleMatchesGpipe) {
  for (const Config& c : grid()) {
    if (c.name != "1f1b") continue;
    SCOPED_TRACE(label(c));
    Schedule s = make_schedule(c.name, c.p, c.m);
    ScheduleReport report = check_schedule(s);
    for (int r = 0; r < c.p; ++r) {
      EXPECT_EQ(report.peak_in_flight[r], std::min(c.p - r, c.m)) << "rank " << r;
      EXPECT_EQ(report.weight_versions[r], 1);
    }
    SimulatedTimeline t = simulate_schedule(s, {1, 1, 1});
    for (double b : t.bubble_fraction) EXPECT_NEAR(b, bubble_1f1b(c.p, c.m), 1e-12);
  }
}

TEST(ScheduleInterleaved, PeersWrapFromTheLastRankToTheFirst) {
  Schedule s = make_schedule("interleaved", 2, 2, 2);
  // Stage 1 (rank 1, chunk 0) feeds stage 2 (rank 0, chunk 1).
  const auto& r1 = s.actions[1];
  auto send = std::find(r1.begin(), r1.end(), Action{ActionKind::kSendActivation, 0, 0, 0});
  EXPECT_NE(send, r1.end());
  const auto& r0 = s.actions[0];
  auto recv = std::find(r0.begin(), r0.end(), Action{ActionKind::kRecvActivation, 0, 1, 1});
  ASSERT_NE(recv, r0.end());
  EXPECT_EQ(*(recv + 1), (Action{ActionKind::kForward, 0, 1}));
}

TEST(ScheduleInterleaved, ForwardUnitsGroupPMicroBatchesPerChunk) {
  Schedule s = make_schedule("interleaved", 2, 4, 2);
  std::vector<Action> fwd;
  for (const Action& a : compute_only(s.actions[0]))
    if (a.kind == ActionKind::kForward) fwd.push_back(a);
  // (micro-batch, chunk): (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1).
  const std::vector<std::pair<int, int>> want = {{0, 0}, {1, 0}, {0, 1}, {1, 1},
                                                 {2, 0}, {3, 0}, {2, 1}, {3, 1}};
  ASSERT_EQ(fwd.size(), want.size());
  for (size_t u = 0; u < want.size(); ++u) {
    EXPECT_EQ(fwd[u].microbatch, want[u].first) << "unit " << u;
    EXPECT_EQ(fwd[u].chunk, want[u].second) << "unit " << u;
  }
}

// Peak units on rank r: min(2(p-1-r) + (v-1)p + 1, m*v), the warm-up plus
// the one forward of the first steady pair. Rank 0: min(vp + p - 1, mv).
// Bubble (Narayanan et al. 2021): (p-1)/v idle per m busy, i.e.
// (p-1)/(vm + p - 1) of each rank's time.
TEST(ScheduleInterleaved, InFlightAndBubbleMatchThePaper) {
  std::vector<Config> configs;
  for (const Config& c : grid())
    if (c.name == "interleaved") configs.push_back(c);
  configs.push_back({"interleaved", 2, 4, 3});
  configs.push_back({"interleaved", 4, 8, 4});
  ASSERT_EQ(configs.size(), 7u);
  for (const Config& c : configs) {
    SCOPED_TRACE(label(c));
    Schedule s = make_schedule(c.name, c.p, c.m, c.v);
    ScheduleReport report = check_schedule(s);
    EXPECT_EQ(report.peak_in_flight[0], std::min(c.v * c.p + c.p - 1, c.m * c.v));
    for (int r = 0; r < c.p; ++r) {
      EXPECT_EQ(report.peak_in_flight[r],
                std::min(2 * (c.p - 1 - r) + (c.v - 1) * c.p + 1, c.m * c.v));
      EXPECT_EQ(report.weight_versions[r], 1);
    }
    SimulatedTimeline t = simulate_schedule(s, {1, 1, 1});
    for (double b : t.bubble_fraction) {
      EXPECT_NEAR(b, double(c.p - 1) / (c.v * c.m + c.p - 1), 1e-12);
      EXPECT_LT(b, bubble_1f1b(c.p, c.m));
    }
  }
}

TEST(ScheduleZeroBubble, KeepsOneFOneBsOrderOfForwardAndInputGradient) {
  for (const Config& c : grid()) {
    if (c.name != "zb-h1") continue;
    SCOPED_TRACE(label(c));
    Schedule zb = make_schedule("zb-h1", c.p, c.m);
    Schedule ofob = make_schedule("1f1b", c.p, c.m);
    EXPECT_TRUE(zb.split_backward);
    for (int r = 0; r < c.p; ++r) {
      std::vector<Action> zb_order, ofob_order = compute_only(ofob.actions[r]);
      for (Action a : compute_only(zb.actions[r])) {
        if (a.kind == ActionKind::kBackwardWeight) continue;
        if (a.kind == ActionKind::kBackwardInput) a.kind = ActionKind::kBackward;
        zb_order.push_back(a);
      }
      EXPECT_EQ(zb_order, ofob_order) << "rank " << r;
    }
    EXPECT_EQ(peak_forward_to_input_grad(zb), check_schedule(ofob).peak_in_flight);
  }
}

TEST(ScheduleZeroBubble, DefersWeightGradientsByTheRank) {
  Schedule s = make_schedule("zb-h1", 4, 8);
  // Rank 2: BW(i) right after BI(i + 2); BW(6), BW(7) at the end.
  std::vector<Action> order = compute_only(s.actions[2]);
  for (size_t j = 0; j < order.size(); ++j) {
    const Action& a = order[j];
    if (a.kind != ActionKind::kBackwardWeight || a.microbatch >= 6) continue;
    ASSERT_GT(j, 0u);
    EXPECT_EQ(order[j - 1], (Action{ActionKind::kBackwardInput, a.microbatch + 2}));
  }
  ASSERT_EQ(order.size(), 24u);
  EXPECT_EQ(order[22], (Action{ActionKind::kBackwardWeight, 6}));
  EXPECT_EQ(order[23], (Action{ActionKind::kBackwardWeight, 7}));
}

// In flight from F to BW: min(p, m) on every rank, never above 1F1B's
// rank-0 peak. Bubble with F = BI = BW = 1: (p-1)/(3m+p-1) for m >= p, a
// third of 1F1B's idle time; (2p-m-1)/(2m+2p-1) for m < p.
TEST(ScheduleZeroBubble, InFlightAndBubbleAsStated) {
  for (const Config& c : grid()) {
    if (c.name != "zb-h1") continue;
    SCOPED_TRACE(label(c));
    Schedule s = make_schedule(c.name, c.p, c.m);
    ScheduleReport report = check_schedule(s);
    const int ofob_worst = std::min(c.p, c.m);
    for (int r = 0; r < c.p; ++r) {
      EXPECT_EQ(report.peak_in_flight[r], std::min(c.p, c.m)) << "rank " << r;
      EXPECT_LE(report.peak_in_flight[r], ofob_worst);
      EXPECT_EQ(report.weight_versions[r], 1);
    }
    SimulatedTimeline t = simulate_schedule(s, {1, 1, 1});
    const double want = c.m >= c.p ? double(c.p - 1) / (3 * c.m + c.p - 1)
                                   : double(2 * c.p - c.m - 1) / (2 * c.m + 2 * c.p - 1);
    SimulatedTimeline ofob = simulate_schedule(make_schedule("1f1b", c.p, c.m), {1, 1, 1});
    for (int r = 0; r < c.p; ++r) {
      EXPECT_NEAR(t.bubble_fraction[r], want, 1e-12) << "rank " << r;
      EXPECT_LT(t.bubble_fraction[r], ofob.bubble_fraction[r]);
    }
    if (c.m >= c.p) {
      // Idle time per rank: p-1 units against 1F1B's 3(p-1).
      EXPECT_NEAR(t.makespan - 3 * c.m, (ofob.makespan - 3 * c.m) / 3, 1e-12);
    }
  }
}

TEST(ScheduleAsynchronous, OneFOneBOrderWithStepsAfterBackwards) {
  for (const std::string name : {"pipedream", "xpipe", "2bw"}) {
    SCOPED_TRACE(name);
    Schedule s = make_schedule(name, 4, 8);
    Schedule ofob = make_schedule("1f1b", 4, 8);
    EXPECT_TRUE(s.asynchronous);
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(compute_only(s.actions[r]), compute_only(ofob.actions[r]));
      std::vector<int> steps;
      int last_backward = -1;
      for (const Action& a : s.actions[r]) {
        if (a.kind == ActionKind::kBackward) last_backward = a.microbatch;
        if (a.kind == ActionKind::kOptimizerStep) {
          EXPECT_EQ(a.microbatch, last_backward);
          steps.push_back(a.microbatch);
        }
      }
      const std::vector<int> every = {0, 1, 2, 3, 4, 5, 6, 7}, groups = {3, 7};
      EXPECT_EQ(steps, name == std::string("2bw") ? groups : every);
    }
  }
}

// PipeDream stashes the version each in-flight forward used. On rank r with
// W = p-1-r warm-up forwards: 1 + min(W, m-W) versions when W < m (p - r
// once m >= 2W, the paper's steady state), 1 + min(1, m-1) when W >= m.
int pipedream_versions(int p, int m, int r) {
  const int w = p - 1 - r;
  return w < m ? 1 + std::min(w, m - w) : 1 + std::min(1, m - 1);
}

TEST(ScheduleAsynchronous, WeightVersionsAndInFlight) {
  int checked_steady = 0;
  for (int p : {1, 2, 3, 4, 8})
    for (int m = 1; m <= 12; ++m)
      for (const std::string name : {"pipedream", "2bw", "xpipe"}) {
        SCOPED_TRACE(str_cat(name, " p=", p, " m=", m));
        Schedule s = make_schedule(name, p, m);
        ScheduleReport report = check_schedule(s);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(report.peak_in_flight[r], std::min(p - r, m)) << "rank " << r;
          int want = 1;  // xpipe predicts weights instead of stashing
          if (name == "pipedream") want = pipedream_versions(p, m, r);
          // 2bw: a step while earlier micro-batches are in flight happens on
          // ranks with warm-up forwards once there is more than one group.
          if (name == "2bw") want = (m > p && r < p - 1) ? 2 : 1;
          EXPECT_EQ(report.weight_versions[r], want) << "rank " << r;
          if (name == "pipedream" && m >= 2 * (p - 1 - r)) {
            EXPECT_EQ(report.weight_versions[r], p - r);
            ++checked_steady;
          }
        }
      }
  EXPECT_GT(checked_steady, 100);
}

TEST(ScheduleAsynchronous, BubbleIsOnlyFillAndDrain) {
  for (const Config& c : grid()) {
    if (!make_schedule(c.name, c.p, c.m, c.v).asynchronous) continue;
    SCOPED_TRACE(label(c));
    SimulatedTimeline t = simulate_schedule(make_schedule(c.name, c.p, c.m), {1, 1, 1});
    for (double b : t.bubble_fraction) EXPECT_NEAR(b, bubble_1f1b(c.p, c.m), 1e-12);
  }
}

TEST(ScheduleSimulate, CostsScaleTheTimeline) {
  Schedule s = make_schedule("1f1b", 2, 2);
  SimulatedTimeline t = simulate_schedule(s, {2, 1.5, 0.5});
  // Rank 0: F0 [0,2] F1 [2,4]; rank 1: F0 [2,4] B0 [4,6] F1 [6,8] B1 [8,10];
  // rank 0: B0 [6,8] B1 [10,12].
  ASSERT_EQ(t.events.size(), 8u);
  EXPECT_DOUBLE_EQ(t.makespan, 12);
  EXPECT_EQ(t.events.back().rank, 0);
  EXPECT_EQ(t.events.back().action, (Action{ActionKind::kBackward, 1}));
  EXPECT_DOUBLE_EQ(t.events.back().start, 10);
  EXPECT_DOUBLE_EQ(t.bubble_fraction[0], 1 - 8.0 / 12);
  EXPECT_DOUBLE_EQ(t.bubble_fraction[1], 1 - 8.0 / 12);
  EXPECT_NE(error_of([&] {
              simulate_schedule(s, {-1, 1, 1});
            }).find("forward=-1"),
            std::string::npos);
}

// --- hand-broken schedules ---------------------------------------------------

TEST(ScheduleCheckRejects, ARemovedRecv) {
  Schedule s = make_schedule("1f1b", 2, 2);
  ASSERT_EQ(s.actions[1][0], (Action{ActionKind::kRecvActivation, 0, 0, 0}));
  s.actions[1].erase(s.actions[1].begin());
  const std::string e = error_of([&] { check_schedule(s); });
  EXPECT_NE(e.find("rank 0 action 1 (send_act micro-batch 0 stage 0 peer 1)"), std::string::npos)
      << e;
  EXPECT_NE(e.find("no matching recv_act on rank 1"), std::string::npos) << e;
}

TEST(ScheduleCheckRejects, ASwappedOrderThatDeadlocks) {
  Schedule s = make_schedule("gpipe", 2, 2);
  // Rank 0: F0 send0 [F1 send1] [recv_grad0 B0] ... -> backward of 0 first:
  // rank 0 waits for a gradient that rank 1 sends only after micro-batch 1.
  auto& r0 = s.actions[0];
  ASSERT_EQ(r0[4], (Action{ActionKind::kRecvGradient, 0, 0, 1}));
  std::rotate(r0.begin() + 2, r0.begin() + 4, r0.begin() + 6);
  const std::string e = error_of([&] { check_schedule(s); });
  EXPECT_NE(e.find("deadlocks"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 action 2 (recv_grad micro-batch 0 stage 0 peer 1) waits for rank 1"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("rank 1 action 2 (recv_act micro-batch 1 stage 1 peer 0) waits for rank 0"),
            std::string::npos)
      << e;
}

TEST(ScheduleCheckRejects, ARecvAfterTheForwardItFeeds) {
  Schedule s = make_schedule("1f1b", 2, 2);
  std::swap(s.actions[1][0], s.actions[1][1]);  // F0 before its recv_act
  const std::string e = error_of([&] { check_schedule(s); });
  EXPECT_NE(e.find("rank 1 action 1 (recv_act micro-batch 0 stage 1 peer 0): comes after the "
                   "forward that needs it, rank 1 action 0 (F micro-batch 0 stage 1)"),
            std::string::npos)
      << e;
}

TEST(ScheduleCheckRejects, ADuplicatedForward) {
  Schedule s = make_schedule("gpipe", 2, 2);
  ASSERT_EQ(s.actions[1][1], (Action{ActionKind::kForward, 0}));
  s.actions[1].insert(s.actions[1].begin() + 4, s.actions[1][1]);
  const std::string e = error_of([&] { check_schedule(s); });
  EXPECT_NE(e.find("rank 1 action 4 (F micro-batch 0 stage 1): duplicates rank 1 action 1 (F "
                   "micro-batch 0 stage 1)"),
            std::string::npos)
      << e;
}

TEST(ScheduleCheckRejects, AMissingWeightGradient) {
  Schedule s = make_schedule("zb-h1", 2, 2);
  auto& r1 = s.actions[1];
  r1.erase(std::find(r1.begin(), r1.end(), Action{ActionKind::kBackwardWeight, 1}));
  const std::string e = error_of([&] { check_schedule(s); });
  EXPECT_NE(e.find("stage 1 (rank 1, chunk 0) has no BW for micro-batch 1"), std::string::npos)
      << e;
}

TEST(ScheduleCheckRejects, AWrongPeer) {
  Schedule s = make_schedule("interleaved", 2, 2, 2);
  auto& r1 = s.actions[1];
  auto send = std::find(r1.begin(), r1.end(), Action{ActionKind::kSendActivation, 0, 0, 0});
  ASSERT_NE(send, r1.end());
  send->peer = 1;
  const std::string e = error_of([&] { check_schedule(s); });
  EXPECT_NE(e.find("send_act micro-batch 0 stage 1 peer 1): peer should be rank 0, which holds "
                   "stage 2"),
            std::string::npos)
      << e;
}

TEST(ScheduleCheckRejects, BadOptimizerSteps) {
  Schedule sync = make_schedule("1f1b", 2, 2);
  sync.actions[0].pop_back();
  EXPECT_NE(error_of([&] { check_schedule(sync); }).find("rank 0 has no optimizer step"),
            std::string::npos);

  Schedule early = make_schedule("gpipe", 2, 2);
  auto& r1e = early.actions[1];  // ... B1 send_grad1 step -> step B1 send_grad1
  std::rotate(r1e.end() - 3, r1e.end() - 1, r1e.end());
  const std::string e = error_of([&] { check_schedule(early); });
  EXPECT_NE(e.find("(B micro-batch 1 stage 1): runs after the optimizer step rank 1 action 6"),
            std::string::npos)
      << e;

  Schedule async = make_schedule("pipedream", 2, 3);
  auto& r1 = async.actions[1];  // F0 B0 step0 ...: move step0 behind B1
  auto step0 = std::find(r1.begin(), r1.end(), Action{ActionKind::kOptimizerStep, 0});
  auto b1 = std::find(r1.begin(), r1.end(), Action{ActionKind::kBackward, 1});
  std::rotate(step0, step0 + 1, b1 + 1);
  const std::string a = error_of([&] { check_schedule(async); });
  EXPECT_NE(a.find("(B micro-batch 1 stage 1): runs before rank 1 action"), std::string::npos) << a;
  EXPECT_NE(a.find("which applies only earlier micro-batches"), std::string::npos) << a;
}

TEST(ScheduleCheckRejects, FieldsOutOfRange) {
  Schedule s = make_schedule("1f1b", 2, 2);
  s.actions[0][0].microbatch = 5;
  EXPECT_NE(error_of([&] {
              check_schedule(s);
            }).find("rank 0 action 0 (F micro-batch 5 stage 0): micro-batch 5 is outside [0, 2)"),
            std::string::npos);
  Schedule split = make_schedule("1f1b", 2, 2);
  split.actions[0][0].kind = ActionKind::kBackwardWeight;
  EXPECT_NE(error_of([&] { check_schedule(split); }).find("BI and BW need split_backward"),
            std::string::npos);
  Schedule ranks = make_schedule("1f1b", 2, 2);
  ranks.actions.pop_back();
  EXPECT_NE(
      error_of([&] { check_schedule(ranks); }).find("has action lists for 1 ranks, but ranks=2"),
      std::string::npos);
}

TEST(ScheduleCheckRejects, CommunicationGivenToTheHelper) {
  Schedule s = make_schedule("1f1b", 2, 2);
  EXPECT_NE(error_of([&] { insert_communication(s); })
                .find("rank 0 action 1 (send_act micro-batch 0 stage 0 peer 1) is already a send "
                      "or recv"),
            std::string::npos);
}

// --- bad arguments -------------------------------------------------------------

TEST(ScheduleErrors, NameTheBadValue) {
  auto message = [](const std::string& name, int p, int m, int v) {
    return error_of([&] { make_schedule(name, p, m, v); });
  };
  EXPECT_EQ(message("zb-h2", 2, 2, 1),
            "unknown pipeline schedule 'zb-h2'; valid schedules: gpipe, 1f1b, interleaved, zb-h1, "
            "pipedream, 2bw, xpipe");
  EXPECT_EQ(message("1f1b", 0, 2, 1), "schedule '1f1b': pipeline ranks must be >= 1, got 0");
  EXPECT_EQ(message("gpipe", 2, 0, 1), "schedule 'gpipe': micro-batches must be >= 1, got 0");
  EXPECT_NE(message("pipedream", 2, 2, 2)
                .find("'pipedream' runs one model chunk per rank, got "
                      "chunks=2"),
            std::string::npos);
  EXPECT_NE(message("interleaved", 2, 2, 1)
                .find("needs chunks >= 2 model chunks per rank, got "
                      "chunks=1"),
            std::string::npos);
  EXPECT_NE(message("interleaved", 1, 2, 2).find("needs pipeline ranks >= 2, got ranks=1"),
            std::string::npos);
  EXPECT_NE(message("interleaved", 4, 6, 2)
                .find("micro-batches to be a multiple of pipeline ranks, got microbatches=6 with "
                      "ranks=4"),
            std::string::npos);
}

TEST(ScheduleErrors, OneRankNeedsNoCommunication) {
  for (const std::string& name : schedule_names()) {
    if (name == "interleaved") continue;
    SCOPED_TRACE(name);
    Schedule s = make_schedule(name, 1, 3);
    check_schedule(s);
    for (const Action& a : s.actions[0]) EXPECT_FALSE(is_communication(a.kind));
    EXPECT_NEAR(simulate_schedule(s).bubble_fraction[0], 0, 1e-12);
  }
}

}  // namespace
// --- check_schedule's memo of recently passed schedules ----------------------

TEST(ScheduleCheckMemo, AnEqualScheduleGetsTheReportAFreshCheckGives) {
  const Schedule s = make_schedule("pipedream", 4, 8);
  const ScheduleReport first = check_schedule(s);
  const ScheduleReport again = check_schedule(s);  // answered from the memo
  // Push `s` out of the memo (it keeps 16 schedules), then check it afresh.
  for (int m = 1; m <= 20; ++m) check_schedule(make_schedule("gpipe", 3, m));
  const ScheduleReport fresh = check_schedule(s);
  for (const ScheduleReport* r : {&first, &again}) {
    EXPECT_EQ(r->peak_in_flight, fresh.peak_in_flight);
    EXPECT_EQ(r->weight_versions, fresh.weight_versions);
  }
  EXPECT_EQ(fresh.weight_versions, (std::vector<int>{4, 3, 2, 1}));  // p - r
}

TEST(ScheduleCheckMemo, AScheduleDifferingInOneActionIsCheckedAgain) {
  const Schedule good = make_schedule("1f1b", 4, 8);
  check_schedule(good);
  Schedule bad = good;  // same name, sizes and action counts as the passed one
  ASSERT_EQ(bad.actions[1][0], (Action{ActionKind::kRecvActivation, 0, 0, 0}));
  std::swap(bad.actions[1][0], bad.actions[1][1]);  // F0 before its recv_act
  const std::string e = error_of([&] { check_schedule(bad); });
  EXPECT_NE(e.find("comes after the forward that needs it"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { check_schedule(bad); }).find("comes after"), std::string::npos);
  check_schedule(good);  // the good one still passes
}

TEST(ScheduleSimulate, TheCheckedVariantTimesExactlyAsTheCheckingOne) {
  for (const char* name : {"gpipe", "1f1b", "zb-h1"}) {
    const Schedule s = make_schedule(name, 4, 8);
    ActionCosts costs;
    costs.compute = [](int r, const Action& a) {
      return 1.0 + 0.25 * r + 0.125 * static_cast<int>(a.kind) + 0.01 * a.microbatch;
    };
    costs.transfer = [](int r, const Action& a) { return 0.3 + 0.05 * r + 0.02 * a.microbatch; };
    const SimulatedTimeline a = simulate_schedule(s, costs);
    const SimulatedTimeline b = simulate_checked_schedule(s, costs);
    EXPECT_EQ(a.makespan, b.makespan) << name;
    EXPECT_EQ(a.bubble_fraction, b.bubble_fraction) << name;
    ASSERT_EQ(a.events.size(), b.events.size()) << name;
    for (size_t i = 0; i < a.events.size(); ++i) {
      EXPECT_EQ(a.events[i].rank, b.events[i].rank);
      EXPECT_EQ(a.events[i].action, b.events[i].action);
      EXPECT_EQ(a.events[i].start, b.events[i].start);
      EXPECT_EQ(a.events[i].end, b.events[i].end);
    }
    EXPECT_GT(a.makespan, 8 * (1.0 + 1.0));  // the transfers and rank costs count
  }
}

}  // namespace tessel
