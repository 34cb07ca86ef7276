// Pipeline actions: one step in one pipe rank's schedule.
//
// A schedule is a list of these per rank, run in order. Compute actions
// (F, B, BI, BW) act on one micro-batch of one model chunk; communication
// actions move that micro-batch's activation or gradient between the rank
// holding a stage and the rank holding its neighbour; an optimizer step
// updates every chunk on its rank. Invariants (checked by check_schedule):
// microbatch is in [0, m) except for a synchronous step (-1, covering all);
// chunk is in [0, v) (0 for a step); peer is set exactly for sends and recvs.
#pragma once

namespace tessel {

enum class ActionKind {
  kForward,
  kBackward,  // input and weight gradient together
  kBackwardInput,
  kBackwardWeight,
  kSendActivation,
  kRecvActivation,
  kSendGradient,
  kRecvGradient,
  kOptimizerStep,
};

// Short name: "F", "B", "BI", "BW", "send_act", "recv_act", "send_grad",
// "recv_grad", "step".
const char* action_name(ActionKind k);

// F, B, BI or BW: the actions that take time.
bool is_compute(ActionKind k);
// A send or a recv.
bool is_communication(ActionKind k);

struct Action {
  ActionKind kind;
  int microbatch = -1;  // -1 for an optimizer step covering all
  int chunk = 0;        // model chunk on this rank, 0..v-1; stage = chunk * p + rank
  int peer = -1;        // pipe rank of the other side of a send/recv, else -1

  bool operator==(const Action&) const = default;
};

}  // namespace tessel
