// transfer_of: from a send or recv and its rank to the message it moves.
#include "tessel/schedule/transfer.h"

#include "tessel/base/error.h"

namespace tessel {

Transfer transfer_of(const Schedule& s, int rank, int index) {
  const Action& a = s.actions[rank][index];
  const int stage = s.stage_of(rank, a.chunk);
  const int last = s.stages() - 1;
  auto fail = [&](const char* why) {
    TS_THROW("schedule '", s.name, "': ", describe_action(s, rank, index), ": ", why);
  };
  Transfer t;
  switch (a.kind) {
    case ActionKind::kSendActivation:
      if (stage == last) fail("the last stage has no next stage to send an activation to");
      t = {false, stage, stage + 1, a.microbatch};
      break;
    case ActionKind::kRecvActivation:
      if (stage == 0) fail("stage 0 reads the batch and receives no activation");
      t = {false, stage - 1, stage, a.microbatch};
      break;
    case ActionKind::kSendGradient:
      if (stage == 0) fail("stage 0 has no previous stage to send a gradient to");
      t = {true, stage, stage - 1, a.microbatch};
      break;
    case ActionKind::kRecvGradient:
      if (stage == last) fail("the last stage starts its backward from the loss, not a recv");
      t = {true, stage + 1, stage, a.microbatch};
      break;
    default:
      TS_CHECK(false, describe_action(s, rank, index), " is not a send or recv");
  }
  const int other = t.src_stage == stage ? t.dst_stage : t.src_stage;
  if (a.peer != s.rank_of_stage(other))
    TS_THROW("schedule '", s.name, "': ", describe_action(s, rank, index), ": peer should be rank ",
             s.rank_of_stage(other), ", which holds stage ", other, ", not ", a.peer);
  return t;
}

}  // namespace tessel
