#include "tessel/plan/profile/hardware_model.h"

#include <algorithm>

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

const char* progress_mode_name(CommProgress::Mode m) {
  return m == CommProgress::Mode::kBackground ? "background" : "polled";
}

double HardwareModel::compute_share(int, int) const { return 1.0; }

double HardwareModel::kernel_seconds(const std::string&, double bytes, double flops, Precision p,
                                     int threads) const {
  return std::max(bytes > 0 ? memory_seconds(bytes, threads) : 0.0, flops / peak_flops(p, threads));
}

}  // namespace tessel::plan
