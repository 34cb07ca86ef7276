// Names and classes of pipeline actions.
#include "tessel/schedule/action.h"

#include <iterator>

namespace tessel {

const char* action_name(ActionKind k) {
  static const char* const kNames[] = {"F",        "B",         "BI",        "BW",  "send_act",
                                       "recv_act", "send_grad", "recv_grad", "step"};
  static_assert(std::size(kNames) == static_cast<size_t>(ActionKind::kOptimizerStep) + 1,
                "one name per ActionKind, in its order");
  const auto i = static_cast<size_t>(k);
  return i < std::size(kNames) ? kNames[i] : "?";
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
