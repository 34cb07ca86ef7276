// The hardware model of a GPU cluster this machine is not, read from a
// cluster file (examples/clusters/, docs/planner.md "Cluster files").
//
// Schema (per device, one direction):
//   {"name", "nodes", "devices_per_node",
//    "device": {"name", "peak_tflops": {"bf16", "f32"}, "memory_bandwidth_gbs", "memory_gib"},
//    "links": {"intra_node": {"bandwidth_gbs", "latency_us"}, "inter_node": {...}}}
// Optional keys, with defaults:
//   "gemm_efficiency": {"max": 0.8, "half_gflop": 1.0} — the fraction of peak a
//     GEMM of F flops achieves, max * F / (F + half_gflop * 1e9);
//   "memory_efficiency": 0.8 — the fraction of memory bandwidth memory-bound
//     kernels achieve;
//   "efficiency" in each link: 0.8 — the fraction of link bandwidth a
//     collective achieves (bus bandwidth over link bandwidth).
// A GEMM takes the larger of its compute time at that efficiency and its
// operand and result traffic (2 bytes an element in bf16, 4 in f32) over
// the memory bandwidth. Collectives are ring algorithms on one link
// (alpha_beta.h); inter_node's bandwidth is per device (each GPU its own
// NIC), so a ring that crosses nodes runs at it. Unknown keys, missing ones
// and non-positive numbers are errors naming the file and the key.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tessel/plan/model/alpha_beta.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

struct LinkSpec {
  double bandwidth_gbs = 0;  // GB/s per device, one direction
  double latency_us = 0;
  double efficiency = 0.8;
  // alpha = latency, beta = 1 / (bandwidth * efficiency).
  AlphaBeta alpha_beta() const;
};

struct ClusterData {
  std::string name;
  int nodes = 1, devices_per_node = 1;
  std::string device_name;
  double peak_tflops_bf16 = 0, peak_tflops_f32 = 0;
  double memory_bandwidth_gbs = 0, memory_gib = 0;
  LinkSpec intra_node, inter_node;
  double gemm_efficiency_max = 0.8, gemm_half_gflop = 1.0;
  double memory_efficiency = 0.8;
};

class ClusterSpec : public HardwareModel {
 public:
  static ClusterSpec load(const std::string& path);
  static ClusterSpec from_json(const nlohmann::json& j, const std::string& source);
  explicit ClusterSpec(ClusterData data) : data_(std::move(data)) {}

  const ClusterData& data() const { return data_; }
  // The fraction of peak a GEMM of `flops` achieves (before the memory bound).
  double gemm_efficiency(double flops) const;

  std::string name() const override { return data_.name; }
  double gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Precision p,
                      int threads) const override;
  double memory_seconds(double bytes, int threads) const override;
  double collective_seconds(CollectiveKind kind, double bytes, int ranks, Link link) const override;
  double p2p_seconds(double bytes, Link link) const override;
  int devices_per_node() const override { return data_.devices_per_node; }
  int total_devices() const override { return data_.nodes * data_.devices_per_node; }
  int64_t device_memory_bytes() const override;
  bool host_buffers_on_device() const override { return false; }  // GPUs
  double peak_flops(Precision p, int threads) const override;

 private:
  const LinkSpec& link(Link l) const {
    return l == Link::kIntraNode ? data_.intra_node : data_.inter_node;
  }

  ClusterData data_;
};

}  // namespace tessel::plan
