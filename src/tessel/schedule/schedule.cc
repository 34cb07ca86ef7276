// make_schedule: argument checks, the per-schedule compute order, the final
// optimizer step of synchronous schedules, then the shared communication
// pass.
#include "tessel/schedule/schedule.h"

#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/schedule/builders.h"
#include "tessel/schedule/communication.h"

namespace tessel {

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"gpipe",     "1f1b", "interleaved", "zb-h1",
                                                 "pipedream", "2bw",  "xpipe"};
  return names;
}

namespace {

void check_arguments(const std::string& name, int ranks, int microbatches, int chunks) {
  const std::vector<std::string>& names = schedule_names();
  if (std::find(names.begin(), names.end(), name) == names.end())
    TS_THROW("unknown pipeline schedule '", name, "'; valid schedules: ", str_join(names, ", "));
  if (ranks < 1) TS_THROW("schedule '", name, "': pipeline ranks must be >= 1, got ", ranks);
  if (microbatches < 1)
    TS_THROW("schedule '", name, "': micro-batches must be >= 1, got ", microbatches);
  if (name != "interleaved") {
    if (chunks != 1)
      TS_THROW("schedule '", name, "' runs one model chunk per rank, got chunks=", chunks,
               " (only 'interleaved' takes chunks > 1)");
    return;
  }
  if (chunks < 2)
    TS_THROW("schedule 'interleaved' needs chunks >= 2 model chunks per rank, got chunks=", chunks,
             " (use '1f1b' for one)");
  if (ranks < 2) TS_THROW("schedule 'interleaved' needs pipeline ranks >= 2, got ranks=", ranks);
  if (microbatches % ranks != 0)
    TS_THROW("schedule 'interleaved' needs micro-batches to be a multiple of pipeline ranks, got ",
             "microbatches=", microbatches, " with ranks=", ranks);
}

RankOrders compute_order(const std::string& name, int p, int m, int v) {
  if (name == "gpipe") return gpipe_order(p, m);
  if (name == "1f1b") return one_f_one_b_order(p, m);
  if (name == "interleaved") return interleaved_order(p, m, v);
  if (name == "zb-h1") return zero_bubble_h1_order(p, m);
  if (name == "pipedream" || name == "xpipe") return asynchronous_order(p, m, 1);
  TS_CHECK(name == "2bw", "no compute order for schedule '", name, "'");
  // PipeDream-2BW: gradients accumulate over p micro-batches per update.
  return asynchronous_order(p, m, p);
}

}  // namespace

Schedule make_schedule(const std::string& name, int ranks, int microbatches, int chunks) {
  check_arguments(name, ranks, microbatches, chunks);
  Schedule s{.name = name,
             .ranks = ranks,
             .chunks = chunks,
             .microbatches = microbatches,
             .asynchronous = name == "pipedream" || name == "2bw" || name == "xpipe",
             .split_backward = name == "zb-h1",
             .actions = compute_order(name, ranks, microbatches, chunks)};
  if (!s.asynchronous)
    for (std::vector<Action>& list : s.actions) list.push_back({ActionKind::kOptimizerStep});
  insert_communication(s);
  return s;
}

std::string describe_action(const Schedule& s, int rank, int index) {
  const Action& a = s.actions[rank][index];
  std::string out = str_cat("rank ", rank, " action ", index, " (", action_name(a.kind));
  if (a.microbatch >= 0 || a.kind != ActionKind::kOptimizerStep)
    out += str_cat(" micro-batch ", a.microbatch);
  if (a.kind != ActionKind::kOptimizerStep) out += str_cat(" stage ", s.stage_of(rank, a.chunk));
  if (a.peer >= 0 || is_communication(a.kind)) out += str_cat(" peer ", a.peer);
  return out + ")";
}

}  // namespace tessel
