// Pipeline schedules as plain data: per pipe rank, the ordered list of
// actions it runs for one training step (or, for the asynchronous schedules,
// for one stretch of m micro-batches without a flush).
//
// Stages are numbered 0..p*v-1; stage k lives on rank k % p as chunk k / p,
// so with interleaving (v > 1) the pipeline wraps from rank p-1 back to
// rank 0. Every schedule make_schedule returns passes check_schedule
// (schedule_check.h): each stage runs one forward and one backward (or one
// BI and one BW) per micro-batch, every send has exactly one matching recv,
// and the lists cannot deadlock with buffered sends and blocking recvs.
// docs/schedules.md describes each schedule. Values; no shared state.
#pragma once

#include <string>
#include <vector>

#include "tessel/schedule/action.h"

namespace tessel {

struct Schedule {
  std::string name;
  int ranks = 1;                // p: pipeline ranks
  int chunks = 1;               // v: model chunks per rank (stages = p*v)
  int microbatches = 1;         // m
  bool asynchronous = false;    // PipeDream-style: weights change between a micro-batch's F and B
  bool split_backward = false;  // backward split into BI and BW (zero-bubble)
  std::vector<std::vector<Action>> actions;  // per pipe rank, in execution order

  int stages() const { return ranks * chunks; }
  int stage_of(int rank, int chunk) const { return chunk * ranks + rank; }
  int rank_of_stage(int stage) const { return stage % ranks; }
  int chunk_of_stage(int stage) const { return stage / ranks; }

  bool operator==(const Schedule&) const = default;
};

// Builds the named schedule: "gpipe", "1f1b", "interleaved", "zb-h1",
// "pipedream", "2bw", "xpipe". Throws an Error naming the bad value for an
// unknown name (listing the valid ones), ranks < 1, microbatches < 1,
// chunks != 1 for a non-interleaved schedule, and for "interleaved"
// chunks < 2, ranks < 2 or microbatches not a multiple of ranks.
Schedule make_schedule(const std::string& name, int ranks, int microbatches, int chunks = 1);

// The names make_schedule accepts, in the order above.
const std::vector<std::string>& schedule_names();

// "rank 1 action 4 (recv_grad micro-batch 2 stage 1 peer 2)": how errors name
// an action. Tolerates out-of-range fields (it is used to report them).
// REQUIRES: rank and index address an action of s.
std::string describe_action(const Schedule& s, int rank, int index);

}  // namespace tessel
