// A hardware model with round figures for cost-model tests: 10 GFLOP/s,
// 10 GB/s, links of 10 us + 1 GB/s, one node of `devices` devices,
// background progress. Tests derive from it to change one property.
#pragma once

#include <string>

#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

class ToyHardware : public HardwareModel {
 public:
  explicit ToyHardware(int devices) : devices_(devices) {}
  std::string name() const override { return "toy hardware"; }
  double gemm_seconds(int64_t b, int64_t m, int64_t n, int64_t k, Precision, int) const override {
    return 2.0 * b * m * n * k / 1e10;
  }
  double memory_seconds(double bytes, int) const override { return bytes / 1e10; }
  double collective_seconds(CollectiveKind, double bytes, int ranks, Link) const override {
    return (1e-5 + bytes / 1e9) * (ranks - 1) / ranks;
  }
  double p2p_seconds(double bytes, Link) const override { return 1e-5 + bytes / 1e9; }
  int devices_per_node() const override { return devices_; }
  int total_devices() const override { return devices_; }
  int64_t device_memory_bytes() const override { return 0; }
  double peak_flops(Precision, int) const override { return 1e10; }

 protected:
  int devices_;
};

}  // namespace tessel::plan
