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
//     collective achieves (bus bandwidth over link bandwidth);
//   "attention_efficiency" in the device: 0.34 — the fraction of the peak
//     a fused attention's forward and backward reach, its FLOPs counted as
//     FlashAttention's benchmarks count them (causal halved, the backward
//     2.5 times the forward). The default is FlashAttention-2's published
//     best on H100 SXM5 (Dao 2023, arXiv:2307.08691, Sec. 4.1 and Fig. 7:
//     up to 335 TFLOP/s forward + backward, 0.34 of 989), the kernel
//     PyTorch's SDPA runs there; docs/planner.md "Cluster files";
//   "launch_us" in the device: 5 — the least time a kernel instruction
//     takes (the host's launch of it; docs/planner.md "Cluster files");
//   "host_memory_gib": unset — one node's host memory, which its ranks'
//     host buffers (pinned offload, input staging) share; unset, the
//     planner does not check host memory.
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

// FlashAttention-2's forward + backward on H100 SXM5 over the bf16 dense
// peak: 335 / 989 TFLOP/s (above).
inline constexpr double kDefaultAttentionEfficiency = 0.34;
// A CUDA kernel launch from the host, without CUDA graphs: 4-6 us.
inline constexpr double kDefaultLaunchUs = 5;
// A device's link to host memory, one direction: PCIe 4.0 x16 (A100).
inline constexpr double kDefaultHostLinkGbs = 32;
inline constexpr double kDefaultHostLinkLatencyUs = 10;
// A device's share of its node's host memory bandwidth: a DGX A100's two
// 8-channel DDR4-3200 sockets (2 x 204.8 GB/s) over its 8 GPUs.
inline constexpr double kDefaultHostMemoryGbs = 51.2;

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
  LinkSpec host_link{kDefaultHostLinkGbs, kDefaultHostLinkLatencyUs};
  double host_memory_gbs = kDefaultHostMemoryGbs;
  double host_memory_gib = 0;  // per node; 0: not stated
  double gemm_efficiency_max = 0.8, gemm_half_gflop = 1.0;
  double memory_efficiency = 0.8;
  double attention_efficiency = kDefaultAttentionEfficiency;
  double launch_us = kDefaultLaunchUs;
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
  // The fused attention kinds: the longer of their bytes at the memory
  // bandwidth and their FLOPs (FlashAttention's count) at the peak times
  // attention_efficiency; other kinds: HardwareModel's default.
  double kernel_seconds(const std::string& op, double bytes, double flops, Precision p,
                        int threads) const override;
  double collective_seconds(CollectiveKind kind, double bytes, int ranks, Link link) const override;
  double p2p_seconds(double bytes, Link link) const override;
  double host_copy_seconds(double bytes, int threads) const override;
  double host_memory_seconds(double bytes, int threads) const override;
  int devices_per_node() const override { return data_.devices_per_node; }
  int total_devices() const override { return data_.nodes * data_.devices_per_node; }
  int64_t device_memory_bytes() const override;
  int64_t host_memory_bytes() const override;
  bool host_buffers_on_device() const override { return false; }  // GPUs
  double peak_flops(Precision p, int threads) const override;
  double launch_seconds() const override { return data_.launch_us * 1e-6; }

 private:
  const LinkSpec& link(Link l) const {
    return l == Link::kIntraNode ? data_.intra_node : data_.inter_node;
  }

  ClusterData data_;
};

}  // namespace tessel::plan
