#include "tessel/plan/profile/cluster_spec.h"

#include <algorithm>
#include <cmath>

#include "tessel/plan/profile/json_fields.h"

namespace tessel::plan {
namespace {

// A fraction in (0, 1].
double fraction(const JsonFields& f, const char* key) {
  const double v = f.number(key, true);
  if (v > 1) f.fail(key, "is a fraction and must be at most 1, got " + std::to_string(v));
  return v;
}

LinkSpec read_link(const JsonFields& links, const char* key) {
  JsonFields f(links.required(key), links.file(), links.path_of(key));
  f.allow_only({"bandwidth_gbs", "latency_us", "efficiency"});
  LinkSpec l;
  l.bandwidth_gbs = f.number("bandwidth_gbs", true);
  l.latency_us = f.number("latency_us", false);
  if (f.has("efficiency")) l.efficiency = fraction(f, "efficiency");
  return l;
}

}  // namespace

AlphaBeta LinkSpec::alpha_beta() const {
  return {latency_us * 1e-6, 1 / (bandwidth_gbs * 1e9 * efficiency)};
}

ClusterSpec ClusterSpec::load(const std::string& path) {
  return from_json(read_json_file(path, "cluster file"), path);
}

ClusterSpec ClusterSpec::from_json(const nlohmann::json& j, const std::string& source) {
  JsonFields top(j, source, "");
  top.allow_only({"name", "nodes", "devices_per_node", "device", "links", "gemm_efficiency",
                  "memory_efficiency", "host_memory_bandwidth_gbs", "host_memory_gib"});
  ClusterData d;
  d.name = top.string("name");
  d.nodes = static_cast<int>(top.integer("nodes", 1));
  d.devices_per_node = static_cast<int>(top.integer("devices_per_node", 1));

  JsonFields device(top.required("device"), source, "device");
  device.allow_only({"name", "peak_tflops", "memory_bandwidth_gbs", "memory_gib",
                     "attention_efficiency", "launch_us"});
  d.device_name = device.string("name");
  JsonFields peak(device.required("peak_tflops"), source, "device.peak_tflops");
  peak.allow_only({"bf16", "f32"});
  d.peak_tflops_bf16 = peak.number("bf16", true);
  d.peak_tflops_f32 = peak.number("f32", true);
  d.memory_bandwidth_gbs = device.number("memory_bandwidth_gbs", true);
  d.memory_gib = device.number("memory_gib", true);
  if (device.has("attention_efficiency"))
    d.attention_efficiency = fraction(device, "attention_efficiency");
  if (device.has("launch_us")) d.launch_us = device.number("launch_us", false);

  JsonFields links(top.required("links"), source, "links");
  links.allow_only({"intra_node", "inter_node", "host"});
  d.intra_node = read_link(links, "intra_node");
  d.inter_node = read_link(links, "inter_node");
  if (links.has("host")) d.host_link = read_link(links, "host");
  if (top.has("host_memory_bandwidth_gbs"))
    d.host_memory_gbs = top.number("host_memory_bandwidth_gbs", true);
  if (top.has("host_memory_gib")) d.host_memory_gib = top.number("host_memory_gib", true);

  if (top.has("gemm_efficiency")) {
    JsonFields g(top.required("gemm_efficiency"), source, "gemm_efficiency");
    g.allow_only({"max", "half_gflop"});
    if (g.has("max")) d.gemm_efficiency_max = fraction(g, "max");
    if (g.has("half_gflop")) d.gemm_half_gflop = g.number("half_gflop", false);
  }
  if (top.has("memory_efficiency")) d.memory_efficiency = fraction(top, "memory_efficiency");
  return ClusterSpec(std::move(d));
}

double ClusterSpec::gemm_efficiency(double flops) const {
  if (flops <= 0) return data_.gemm_efficiency_max;
  return data_.gemm_efficiency_max * flops / (flops + data_.gemm_half_gflop * 1e9);
}

double ClusterSpec::gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Precision p,
                                 int threads) const {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return 0;
  const double b = double(batch), M = double(m), N = double(n), K = double(k);
  const double flops = 2 * b * M * N * K;
  // Efficiency by the size of one product: a batch of small GEMMs is as
  // efficient as each of them (batched kernels run them side by side, but each
  // keeps its small tiles).
  const double compute = flops / (peak_flops(p, threads) * gemm_efficiency(flops / b));
  const double element = p == Precision::kBF16 ? 2 : 4;
  const double traffic = b * (M * K + K * N + M * N) * element;
  return std::max(compute, memory_seconds(traffic, threads));
}

double ClusterSpec::memory_seconds(double bytes, int threads) const {
  return bytes / (data_.memory_bandwidth_gbs * 1e9 * data_.memory_efficiency);
}

double ClusterSpec::kernel_seconds(const std::string& op, double bytes, double flops, Precision p,
                                   int threads) const {
  if (op != "attention" && op != "attention_grad")
    return HardwareModel::kernel_seconds(op, bytes, flops, p, threads);
  // The node FLOPs count the backward as FlashAttention's benchmarks do
  // (five forward-sized products), the count the efficiency is stated against.
  const double compute = flops / (peak_flops(p, threads) * data_.attention_efficiency);
  return std::max(bytes > 0 ? memory_seconds(bytes, threads) : 0.0, compute);
}

double ClusterSpec::collective_seconds(CollectiveKind kind, double bytes, int ranks, Link l) const {
  return ring_collective_seconds(kind, bytes, ranks, link(l).alpha_beta());
}

double ClusterSpec::p2p_seconds(double bytes, Link l) const {
  return link(l).alpha_beta().seconds(bytes);
}

double ClusterSpec::host_copy_seconds(double bytes, int) const {
  return bytes > 0 ? data_.host_link.alpha_beta().seconds(bytes) : 0;
}

double ClusterSpec::host_memory_seconds(double bytes, int) const {
  return bytes / (data_.host_memory_gbs * 1e9 * data_.memory_efficiency);
}

int64_t ClusterSpec::device_memory_bytes() const {
  return static_cast<int64_t>(std::llround(data_.memory_gib * 1073741824.0));
}

int64_t ClusterSpec::host_memory_bytes() const {
  return static_cast<int64_t>(std::llround(data_.host_memory_gib * 1073741824.0));
}

double ClusterSpec::peak_flops(Precision p, int threads) const {
  return (p == Precision::kBF16 ? data_.peak_tflops_bf16 : data_.peak_tflops_f32) * 1e12;
}

}  // namespace tessel::plan
