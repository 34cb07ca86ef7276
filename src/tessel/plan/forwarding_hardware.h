// A HardwareModel that answers every query from another one: the base of
// wrappers that change one answer (screening's pinned link, screen.cc) or
// watch the queries (the einsums a search prices, measured_einsums.h).
// Holds a reference: `inner` must outlive it.
#pragma once

#include "tessel/plan/hardware_model.h"

namespace tessel::plan {

class ForwardingHardware : public HardwareModel {
 public:
  explicit ForwardingHardware(const HardwareModel& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  double gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Precision p,
                      int threads) const override {
    return inner_.gemm_seconds(batch, m, n, k, p, threads);
  }
  double memory_seconds(double bytes, int threads) const override {
    return inner_.memory_seconds(bytes, threads);
  }
  double kernel_seconds(const std::string& op, double bytes, double flops, Precision p,
                        int threads) const override {
    return inner_.kernel_seconds(op, bytes, flops, p, threads);
  }
  double collective_seconds(CollectiveKind kind, double bytes, int ranks,
                            Link link) const override {
    return inner_.collective_seconds(kind, bytes, ranks, link);
  }
  double p2p_seconds(double bytes, Link link) const override {
    return inner_.p2p_seconds(bytes, link);
  }
  int devices_per_node() const override { return inner_.devices_per_node(); }
  int total_devices() const override { return inner_.total_devices(); }
  int64_t device_memory_bytes() const override { return inner_.device_memory_bytes(); }
  double peak_flops(Precision p, int threads) const override {
    return inner_.peak_flops(p, threads);
  }
  CommProgress progress() const override { return inner_.progress(); }
  double compute_share(int ranks, int threads) const override {
    return inner_.compute_share(ranks, threads);
  }
  CoRun co_run() const override { return inner_.co_run(); }
  EinsumCosting einsum_costing() const override { return inner_.einsum_costing(); }
  double einsum_in_situ_factor(double flops, int threads) const override {
    return inner_.einsum_in_situ_factor(flops, threads);
  }
  std::optional<double> measured_einsum_seconds(const Shape& a, const Shape& b, const Shape& out,
                                                int threads) const override {
    return inner_.measured_einsum_seconds(a, b, out, threads);
  }

 protected:
  const HardwareModel& inner() const { return inner_; }

 private:
  const HardwareModel& inner_;
};

}  // namespace tessel::plan
