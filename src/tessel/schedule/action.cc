// Names and classes of pipeline actions.
#include "tessel/schedule/action.h"

namespace tessel {

const char* action_name(ActionKind k) {
  switch (k) {
    case ActionKind::kForward:
      return "F";
    case ActionKind::kBackward:
      return "B";
    case ActionKind::kBackwardInput:
      return "BI";
    case ActionKind::kBackwardWeight:
      return "BW";
    case ActionKind::kSendActivation:
      return "send_act";
    case ActionKind::kRecvActivation:
      return "recv_act";
    case ActionKind::kSendGradient:
      return "send_grad";
    case ActionKind::kRecvGradient:
      return "recv_grad";
    case ActionKind::kOptimizerStep:
      return "step";
  }
  return "?";
}

bool is_compute(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward ||
         k == ActionKind::kBackwardInput || k == ActionKind::kBackwardWeight;
}

bool is_communication(ActionKind k) {
  return k == ActionKind::kSendActivation || k == ActionKind::kRecvActivation ||
         k == ActionKind::kSendGradient || k == ActionKind::kRecvGradient;
}

}  // namespace tessel
