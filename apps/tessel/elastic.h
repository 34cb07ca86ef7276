// `tessel launch --elastic MIN`: when ranks of a failed attempt are declared
// lost, the launcher relaunches on the ranks that are left, with the mesh,
// layout, schedule, ZeRO stage and recompute policy `tessel plan` ranks first
// for that count (`train --plan auto`), resharding the newest checkpoint as
// any resume onto another layout does.
//
// A rank is declared lost by a file `rank-R` in the launcher's lost
// directory (OUT/.lost, passed to the ranks as TESSEL_LOST_DIR): fault
// injection's `lose=1` writes it before the rank dies; a health checker that
// knows a device or host is gone can write it too. Nothing else declares a
// rank lost: a rank that merely died is relaunched on the same count.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tessel::cli {

// The markers found in the lost directory, all removed by take_lost_ranks.
struct LostRanks {
  std::vector<int> ranks;            // declared lost, in [0, world), sorted, unique
  std::vector<std::string> ignored;  // marker names that name no rank of the job
};

// The ranks of a `world`-rank job declared lost in `lost_dir`; removes every
// `rank-*` marker. A marker whose number is not a rank of the job (rank-7 of
// a 4-rank job, rank-x) shrinks nothing and is listed in `ignored`.
LostRanks take_lost_ranks(const std::string& lost_dir, int world);

struct ElasticRelaunch {
  int ranks = 0;
  std::vector<std::string> command;  // "train", ARGS... with --plan auto
  std::string plan_flags;            // the plan's knobs, for the log
};

// The largest rank count in [min_ranks, alive] for which the planner finds a
// plan for `command` (`train ARGS...`) once its fixed layout knobs (--mesh,
// --layout, --schedule, --chunks, --microbatches, --zero, --recompute,
// --stages, --shard, --plan) are dropped, and the command that trains it.
// nullopt if no count in that range has a plan; `why` then holds what the
// planner said for the smallest count tried.
std::optional<ElasticRelaunch> plan_elastic_relaunch(const std::vector<std::string>& command,
                                                     int alive, int min_ranks, std::string* why);

// Before the first attempt: throws if a relaunch on fewer than `ranks` but
// at least `min_ranks` ranks could need this machine's profile (planning for
// more than one rank) and none is cached, or if `min_ranks` is out of range.
void check_elastic_ready(int ranks, int min_ranks);

}  // namespace tessel::cli
