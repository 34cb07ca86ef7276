// The compute order of each named schedule: one function per schedule,
// returning per rank the F / B / BI / BW actions (and, for the asynchronous
// schedules, the optimizer steps) in execution order. No communication: that
// is added afterwards by insert_communication (communication.h), the same for
// every schedule. Internal to make_schedule, which validates the arguments
// first.
#pragma once

#include <vector>

#include "tessel/schedule/action.h"

namespace tessel {

using RankOrders = std::vector<std::vector<Action>>;

// GPipe: every forward (micro-batch 0..m-1), then every backward (0..m-1).
RankOrders gpipe_order(int ranks, int microbatches);

// PipeDream-Flush (1F1B): rank r runs min(p-1-r, m) warm-up forwards, then
// (F, B) pairs, then the remaining backwards, all in micro-batch order.
RankOrders one_f_one_b_order(int ranks, int microbatches);

// Megatron-LM interleaved 1F1B over (micro-batch, chunk) units.
// REQUIRES: chunks >= 2, ranks >= 2, microbatches % ranks == 0.
RankOrders interleaved_order(int ranks, int microbatches, int chunks);

// ZB-H1: 1F1B with B split into BI and BW, BW deferred (see zero_bubble.cc).
RankOrders zero_bubble_h1_order(int ranks, int microbatches);

// 1F1B without a flush: an optimizer step (microbatch = i) after the backward
// of micro-batch i whenever (i + 1) % step_every == 0, and after the last.
RankOrders asynchronous_order(int ranks, int microbatches, int step_every);

}  // namespace tessel
