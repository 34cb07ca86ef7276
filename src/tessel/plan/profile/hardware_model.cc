#include "tessel/plan/profile/hardware_model.h"

#include <algorithm>
#include <iterator>

namespace tessel::plan {

const char* precision_name(Precision p) { return p == Precision::kF32 ? "f32" : "bf16"; }

const char* collective_name(CollectiveKind k) {
  static const char* const kNames[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"};
  static_assert(std::size(kNames) == static_cast<size_t>(CollectiveKind::kAllToAll) + 1,
                "one name per CollectiveKind, in its order");
  const auto i = static_cast<size_t>(k);
  return i < std::size(kNames) ? kNames[i] : "?";
}

const char* progress_mode_name(CommProgress::Mode m) {
  return m == CommProgress::Mode::kBackground ? "background" : "polled";
}

double HardwareModel::compute_share(int, int) const { return 1.0; }

double HardwareModel::host_copy_seconds(double bytes, int) const {
  return bytes > 0 ? memory_seconds(2 * bytes, 1) : 0;  // the CPU backend's copy: one memcpy
}

double HardwareModel::host_memory_seconds(double bytes, int threads) const {
  return bytes > 0 ? memory_seconds(bytes, threads) : 0;
}

double HardwareModel::kernel_seconds(const std::string&, double bytes, double flops, Precision p,
                                     int threads) const {
  return std::max(bytes > 0 ? memory_seconds(bytes, threads) : 0.0, flops / peak_flops(p, threads));
}

}  // namespace tessel::plan
