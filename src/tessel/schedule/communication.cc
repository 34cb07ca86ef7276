// insert_communication: sends and recvs from the compute order (rules in the
// header).
#include "tessel/schedule/communication.h"

#include "tessel/base/error.h"

namespace tessel {

void insert_communication(Schedule& s) {
  const int last_stage = s.stages() - 1;
  for (int rank = 0; rank < static_cast<int>(s.actions.size()); ++rank) {
    std::vector<Action> out;
    const std::vector<Action>& in = s.actions[rank];
    for (int index = 0; index < static_cast<int>(in.size()); ++index) {
      const Action& a = in[index];
      if (is_communication(a.kind))
        TS_THROW("insert_communication on schedule '", s.name,
                 "': ", describe_action(s, rank, index),
                 " is already a send or recv; pass compute actions and steps only");
      if (a.kind != ActionKind::kOptimizerStep && (a.chunk < 0 || a.chunk >= s.chunks))
        TS_THROW("insert_communication on schedule '", s.name,
                 "': ", describe_action(s, rank, index), " has chunk ", a.chunk, ", outside [0, ",
                 s.chunks, ")");
      const int stage = s.stage_of(rank, a.chunk);
      const bool forward = a.kind == ActionKind::kForward;
      const bool backward = a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardInput;
      if (forward && stage > 0)
        out.push_back(
            {ActionKind::kRecvActivation, a.microbatch, a.chunk, s.rank_of_stage(stage - 1)});
      if (backward && stage < last_stage)
        out.push_back(
            {ActionKind::kRecvGradient, a.microbatch, a.chunk, s.rank_of_stage(stage + 1)});
      out.push_back(a);
      if (forward && stage < last_stage)
        out.push_back(
            {ActionKind::kSendActivation, a.microbatch, a.chunk, s.rank_of_stage(stage + 1)});
      if (backward && stage > 0)
        out.push_back(
            {ActionKind::kSendGradient, a.microbatch, a.chunk, s.rank_of_stage(stage - 1)});
    }
    s.actions[rank] = std::move(out);
  }
}

}  // namespace tessel
