// check_schedule: the six checks listed in schedule_check.h, run in that
// order, then the in-flight and weight-version counts.
#include "tessel/schedule/schedule_check.h"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>

#include "tessel/base/error.h"
#include "tessel/schedule/transfer.h"

namespace tessel {
namespace {

struct Site {
  int rank = -1;
  int index = -1;
};

using ComputeKey = std::tuple<ActionKind, int, int>;  // kind, stage, micro-batch

class Checker {
 public:
  explicit Checker(const Schedule& s) : s_(s) {}

  ScheduleReport run() {
    check_fields();
    match_transfers();
    check_compute();
    check_order();
    check_steps();
    check_progress();
    return measure();
  }

 private:
  const Action& at(Site site) const { return s_.actions[site.rank][site.index]; }
  std::string describe(Site site) const { return describe_action(s_, site.rank, site.index); }

  [[noreturn]] void fail(Site site, const std::string& why) const {
    TS_THROW("schedule '", s_.name, "': ", describe(site), ": ", why);
  }

  ActionKind backward_kind() const {
    return s_.split_backward ? ActionKind::kBackwardInput : ActionKind::kBackward;
  }
  // The action after which a unit's activations are no longer needed.
  ActionKind last_backward_kind() const {
    return s_.split_backward ? ActionKind::kBackwardWeight : ActionKind::kBackward;
  }

  void check_fields() const {
    if (s_.ranks < 1 || s_.chunks < 1 || s_.microbatches < 1)
      TS_THROW("schedule '", s_.name,
               "': ranks, chunks and micro-batches must be >= 1, got ranks=", s_.ranks,
               " chunks=", s_.chunks, " microbatches=", s_.microbatches);
    if (static_cast<int>(s_.actions.size()) != s_.ranks)
      TS_THROW("schedule '", s_.name, "' has action lists for ", s_.actions.size(),
               " ranks, but ranks=", s_.ranks);
    for (int r = 0; r < s_.ranks; ++r) {
      for (int i = 0; i < static_cast<int>(s_.actions[r].size()); ++i) {
        const Site site{r, i};
        const Action& a = at(site);
        if (!is_communication(a.kind) && a.peer != -1)
          fail(site, str_cat("only sends and recvs have a peer, got peer ", a.peer));
        if (a.kind == ActionKind::kOptimizerStep) {
          if (a.chunk != 0)
            fail(site, str_cat("a step covers every chunk of its rank and has chunk 0, got chunk ",
                               a.chunk));
          if (!s_.asynchronous && a.microbatch != -1)
            fail(site, "a synchronous schedule's step has micro-batch -1 (it covers all)");
          if (s_.asynchronous && (a.microbatch < 0 || a.microbatch >= s_.microbatches))
            fail(site, str_cat("an asynchronous step names the last micro-batch it applies, in "
                               "[0, ",
                               s_.microbatches, ")"));
          continue;
        }
        if (a.chunk < 0 || a.chunk >= s_.chunks)
          fail(site, str_cat("chunk ", a.chunk, " is outside [0, ", s_.chunks, ")"));
        if (a.microbatch < 0 || a.microbatch >= s_.microbatches)
          fail(site,
               str_cat("micro-batch ", a.microbatch, " is outside [0, ", s_.microbatches, ")"));
        const bool split_kind =
            a.kind == ActionKind::kBackwardInput || a.kind == ActionKind::kBackwardWeight;
        if (split_kind && !s_.split_backward)
          fail(site, "BI and BW need split_backward; this schedule runs B");
        if (a.kind == ActionKind::kBackward && s_.split_backward)
          fail(site, "a split_backward schedule runs BI and BW, not B");
      }
    }
  }

  void match_transfers() {
    for (int r = 0; r < s_.ranks; ++r) {
      for (int i = 0; i < static_cast<int>(s_.actions[r].size()); ++i) {
        const ActionKind k = s_.actions[r][i].kind;
        if (!is_communication(k)) continue;
        const bool send = k == ActionKind::kSendActivation || k == ActionKind::kSendGradient;
        (send ? sends_ : recvs_)[transfer_of(s_, r, i)].push_back({r, i});
      }
    }
    for (const auto& [t, sites] : sends_) {
      if (sites.size() > 1) fail(sites[1], "sends the same message as " + describe(sites[0]));
      if (!recvs_.count(t))
        fail(sites[0],
             str_cat("has no matching ", t.gradient ? "recv_grad" : "recv_act", " on rank ",
                     s_.rank_of_stage(t.dst_stage), " (stage ", t.dst_stage, ")"));
    }
    for (const auto& [t, sites] : recvs_) {
      if (sites.size() > 1) fail(sites[1], "receives the same message as " + describe(sites[0]));
      if (!sends_.count(t))
        fail(sites[0],
             str_cat("has no matching ", t.gradient ? "send_grad" : "send_act", " on rank ",
                     s_.rank_of_stage(t.src_stage), " (stage ", t.src_stage, ")"));
    }
  }

  void check_compute() {
    for (int r = 0; r < s_.ranks; ++r) {
      for (int i = 0; i < static_cast<int>(s_.actions[r].size()); ++i) {
        const Action& a = s_.actions[r][i];
        if (!is_compute(a.kind)) continue;
        const ComputeKey key{a.kind, s_.stage_of(r, a.chunk), a.microbatch};
        auto [it, fresh] = compute_.emplace(key, Site{r, i});
        if (!fresh) fail({r, i}, "duplicates " + describe(it->second));
      }
    }
    std::vector<ActionKind> needed = {ActionKind::kForward, backward_kind()};
    if (s_.split_backward) needed.push_back(ActionKind::kBackwardWeight);
    for (int k = 0; k < s_.stages(); ++k)
      for (int i = 0; i < s_.microbatches; ++i)
        for (ActionKind kind : needed)
          if (!compute_.count({kind, k, i}))
            TS_THROW("schedule '", s_.name, "': stage ", k, " (rank ", s_.rank_of_stage(k),
                     ", chunk ", s_.chunk_of_stage(k), ") has no ", action_name(kind),
                     " for micro-batch ", i);
  }

  std::optional<Site> find(const std::map<Transfer, std::vector<Site>>& sites,
                           const Transfer& t) const {
    auto it = sites.find(t);
    if (it == sites.end()) return std::nullopt;
    return it->second.front();
  }

  // `before` must come before `after` on their (common) rank; `why()` is
  // the message, formatted only on failure (a check of a long schedule
  // spent most of its time formatting messages it never threw).
  template <typename Why>
  void require_before(Site before, Site after, Site blame, const Why& why) const {
    if (before.index > after.index) fail(blame, why());
  }

  void check_order() const {
    const int last = s_.stages() - 1;
    for (int k = 0; k <= last; ++k) {
      for (int i = 0; i < s_.microbatches; ++i) {
        const Site f = compute_.at({ActionKind::kForward, k, i});
        const Site b = compute_.at({backward_kind(), k, i});
        require_before(f, b, b, [&] { return "runs before its forward " + describe(f); });
        if (s_.split_backward) {
          const Site w = compute_.at({ActionKind::kBackwardWeight, k, i});
          require_before(b, w, w, [&] { return "runs before its input gradient " + describe(b); });
        }
        if (k > 0) {
          auto recv = find(recvs_, {false, k - 1, k, i});
          if (!recv) fail(f, str_cat("has no recv_act for its input from stage ", k - 1));
          require_before(*recv, f, *recv,
                         [&] { return "comes after the forward that needs it, " + describe(f); });
          auto send = find(sends_, {true, k, k - 1, i});
          if (!send) fail(b, str_cat("never sends its gradient to stage ", k - 1));
          require_before(b, *send, *send,
                         [&] { return "comes before the backward it sends, " + describe(b); });
        }
        if (k < last) {
          auto send = find(sends_, {false, k, k + 1, i});
          if (!send) fail(f, str_cat("never sends its activation to stage ", k + 1));
          require_before(f, *send, *send,
                         [&] { return "comes before the forward it sends, " + describe(f); });
          auto recv = find(recvs_, {true, k + 1, k, i});
          if (!recv) fail(b, str_cat("has no recv_grad for its gradient from stage ", k + 1));
          require_before(*recv, b, *recv,
                         [&] { return "comes after the backward that needs it, " + describe(b); });
        }
      }
    }
  }

  void check_steps() const {
    for (int r = 0; r < s_.ranks; ++r) {
      const std::vector<Action>& list = s_.actions[r];
      std::vector<Site> steps;
      for (int i = 0; i < static_cast<int>(list.size()); ++i)
        if (list[i].kind == ActionKind::kOptimizerStep) steps.push_back({r, i});
      if (steps.empty()) TS_THROW("schedule '", s_.name, "': rank ", r, " has no optimizer step");
      if (!s_.asynchronous) {
        if (steps.size() > 1)
          fail(steps[1], "is a second optimizer step; a synchronous schedule has one per rank");
        for (int i = steps[0].index + 1; i < static_cast<int>(list.size()); ++i)
          if (is_compute(list[i].kind))
            fail({r, i}, "runs after the optimizer step " + describe(steps[0]));
        continue;
      }
      for (size_t j = 1; j < steps.size(); ++j)
        if (at(steps[j]).microbatch <= at(steps[j - 1]).microbatch)
          fail(steps[j], "must apply micro-batches beyond " + describe(steps[j - 1]));
      const int applied = at(steps.back()).microbatch;
      if (applied != s_.microbatches - 1)
        fail(steps.back(), str_cat("is the last step but leaves micro-batches ", applied + 1, "..",
                                   s_.microbatches - 1, " unapplied"));
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        if (list[i].kind != last_backward_kind()) continue;
        size_t cover = 0;  // the first step applying this micro-batch
        while (at(steps[cover]).microbatch < list[i].microbatch) ++cover;
        if (steps[cover].index < i)
          fail({r, i}, "runs after " + describe(steps[cover]) + ", the step that applies it");
        if (cover > 0 && steps[cover - 1].index > i)
          fail({r, i}, "runs before " + describe(steps[cover - 1]) +
                           ", which applies only earlier micro-batches");
      }
    }
  }

  void check_progress() const {
    std::vector<int> next(s_.ranks, 0);
    std::set<Transfer> sent;
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < s_.ranks; ++r) {
        const std::vector<Action>& list = s_.actions[r];
        for (; next[r] < static_cast<int>(list.size()); ++next[r], moved = true) {
          const ActionKind k = list[next[r]].kind;
          if (!is_communication(k)) continue;
          const Transfer t = transfer_of(s_, r, next[r]);
          if (k == ActionKind::kSendActivation || k == ActionKind::kSendGradient)
            sent.insert(t);
          else if (!sent.count(t))
            break;
        }
      }
    }
    bool finished = true;
    std::string stuck;
    for (int r = 0; r < s_.ranks; ++r) {
      stuck += r ? "; " : "";
      if (next[r] == static_cast<int>(s_.actions[r].size())) {
        stuck += str_cat("rank ", r, " finished");
      } else {
        finished = false;
        stuck += str_cat(describe({r, next[r]}), " waits for rank ", s_.actions[r][next[r]].peer);
      }
    }
    if (!finished)
      TS_THROW("schedule '", s_.name, "' deadlocks (sends buffered, recvs blocking): ", stuck);
  }

  ScheduleReport measure() const {
    ScheduleReport report;
    for (int r = 0; r < s_.ranks; ++r) {
      std::map<std::pair<int, int>, int> in_flight;  // (micro-batch, chunk) -> weight version
      int version = 0;
      size_t peak = 0, versions = 0;
      for (const Action& a : s_.actions[r]) {
        if (a.kind == ActionKind::kForward) in_flight[{a.microbatch, a.chunk}] = version;
        if (a.kind == last_backward_kind()) in_flight.erase({a.microbatch, a.chunk});
        if (a.kind == ActionKind::kOptimizerStep) ++version;
        std::set<int> needed = {version};
        for (const auto& [unit, v] : in_flight) needed.insert(v);
        peak = std::max(peak, in_flight.size());
        versions = std::max(versions, needed.size());
      }
      if (s_.name == "xpipe") versions = 1;
      report.peak_in_flight.push_back(static_cast<int>(peak));
      report.weight_versions.push_back(static_cast<int>(versions));
    }
    return report;
  }

  const Schedule& s_;
  std::map<Transfer, std::vector<Site>> sends_, recvs_;
  std::map<ComputeKey, Site> compute_;
};

size_t action_count(const Schedule& s) {
  size_t n = 0;
  for (const std::vector<Action>& list : s.actions) n += list.size();
  return n;
}

// The schedules checked last, with their reports: the planner checks the
// same long schedule once per representative rank and again before each
// simulation. A schedule equal to one of them, action for action, has its
// report; at most kKeptSchedules of them and kKeptActions actions in all
// (oldest dropped first). Schedules that fail are not kept.
constexpr size_t kKeptSchedules = 16;
constexpr size_t kKeptActions = size_t{1} << 22;

struct Checked {
  Schedule schedule;
  ScheduleReport report;
  size_t actions;
};

std::mutex checked_mutex;
std::deque<Checked> checked;
size_t checked_actions = 0;

}  // namespace

ScheduleReport check_schedule(const Schedule& s) {
  {
    std::lock_guard<std::mutex> lock(checked_mutex);
    for (const Checked& c : checked)
      if (c.schedule == s) return c.report;
  }
  ScheduleReport report = Checker(s).run();
  const size_t actions = action_count(s);
  if (actions <= kKeptActions) {
    std::lock_guard<std::mutex> lock(checked_mutex);
    checked.push_back({s, report, actions});
    checked_actions += actions;
    while (checked.size() > kKeptSchedules || checked_actions > kKeptActions) {
      checked_actions -= checked.front().actions;
      checked.pop_front();
    }
  }
  return report;
}

}  // namespace tessel
