#include "tessel/plan/hardware_model.h"

namespace tessel::plan {

const char* precision_name(Precision p) { return p == Precision::kF32 ? "f32" : "bf16"; }

const char* collective_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

}  // namespace tessel::plan
