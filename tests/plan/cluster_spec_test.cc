// Cluster files: parsing, unknown or bad keys named in the error, the ring
// alpha-beta formulas, the GEMM roofline, and every shipped example (cluster
// files, and the published runs' model keys as a Tessel config).
#include "tessel/plan/profile/cluster_spec.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "tessel/compile/config.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json cluster_json() {
  return json::parse(R"({
    "name": "test cluster", "nodes": 4, "devices_per_node": 8,
    "device": {"name": "gpu", "peak_tflops": {"bf16": 300, "f32": 20},
               "memory_bandwidth_gbs": 2000, "memory_gib": 80},
    "links": {"intra_node": {"bandwidth_gbs": 250, "latency_us": 2},
              "inter_node": {"bandwidth_gbs": 25, "latency_us": 5, "efficiency": 1}}})");
}

TEST(ClusterSpec, ParsesTheIssueSchemaWithDefaults) {
  const ClusterSpec c = ClusterSpec::from_json(cluster_json(), "c.json");
  EXPECT_EQ(c.name(), "test cluster");
  EXPECT_EQ(c.devices_per_node(), 8);
  EXPECT_EQ(c.total_devices(), 32);
  EXPECT_EQ(c.device_memory_bytes(), int64_t{80} << 30);
  EXPECT_DOUBLE_EQ(c.peak_flops(Precision::kBF16, 1), 300e12);
  EXPECT_DOUBLE_EQ(c.peak_flops(Precision::kF32, 7), 20e12);  // threads ignored
  EXPECT_DOUBLE_EQ(c.data().intra_node.efficiency, 0.8);      // default
  EXPECT_DOUBLE_EQ(c.data().inter_node.efficiency, 1.0);
  EXPECT_DOUBLE_EQ(c.data().memory_efficiency, 0.8);
  EXPECT_DOUBLE_EQ(c.launch_seconds(), kDefaultLaunchUs * 1e-6);
  json j = cluster_json();
  j["device"]["launch_us"] = 0;
  EXPECT_DOUBLE_EQ(ClusterSpec::from_json(j, "c.json").launch_seconds(), 0);
}

// Offload's two rates: the device's link to host memory (a link like the
// others: latency + bytes / (bandwidth x efficiency)) and its share of the
// host's memory bandwidth (at memory_efficiency), each with a default.
TEST(ClusterSpec, HostLinkAndHostMemoryHaveKeysAndDefaults) {
  const ClusterSpec plain = ClusterSpec::from_json(cluster_json(), "c.json");
  EXPECT_DOUBLE_EQ(plain.host_copy_seconds(1e9, 1),
                   kDefaultHostLinkLatencyUs * 1e-6 + 1e9 / (kDefaultHostLinkGbs * 1e9 * 0.8));
  EXPECT_DOUBLE_EQ(plain.host_memory_seconds(1e9, 1), 1e9 / (kDefaultHostMemoryGbs * 1e9 * 0.8));
  EXPECT_DOUBLE_EQ(plain.host_copy_seconds(0, 1), 0);
  EXPECT_EQ(plain.host_memory_bytes(), 0) << "unset: host memory is not checked";
  json j = cluster_json();
  j["links"]["host"] = {{"bandwidth_gbs", 64}, {"latency_us", 0}, {"efficiency", 1}};
  j["host_memory_bandwidth_gbs"] = 100;
  const ClusterSpec set = ClusterSpec::from_json(j, "c.json");
  EXPECT_DOUBLE_EQ(set.host_copy_seconds(64e9, 1), 1);
  EXPECT_DOUBLE_EQ(set.host_memory_seconds(80e9, 1), 1);
  j["host_memory_gib"] = 2048;
  EXPECT_EQ(ClusterSpec::from_json(j, "c.json").host_memory_bytes(), int64_t{2048} << 30);
  j["links"]["host"]["bandwith_gbs"] = 1;
  EXPECT_NE(error_of([&] {
              ClusterSpec::from_json(j, "c.json");
            }).find("unknown key 'links.host.bandwith_gbs'"),
            std::string::npos);
}

TEST(ClusterSpec, ErrorsNameFileAndKey) {
  auto error = [](const json& j) { return error_of([&] { ClusterSpec::from_json(j, "c.json"); }); };
  json j = cluster_json();
  j["gpus_per_node"] = 8;
  EXPECT_NE(error(j).find("c.json: unknown key 'gpus_per_node'"), std::string::npos) << error(j);
  j = cluster_json();
  j["links"]["intra_node"]["bandwith_gbs"] = 1;
  EXPECT_NE(error(j).find("unknown key 'links.intra_node.bandwith_gbs'"), std::string::npos)
      << error(j);
  j = cluster_json();
  j["device"]["peak_tflops"].erase("f32");
  EXPECT_NE(error(j).find("key 'device.peak_tflops.f32' is missing"), std::string::npos)
      << error(j);
  j = cluster_json();
  j["links"]["inter_node"]["bandwidth_gbs"] = -25;
  EXPECT_NE(error(j).find("key 'links.inter_node.bandwidth_gbs' must be a positive number"),
            std::string::npos)
      << error(j);
  j = cluster_json();
  j["gemm_efficiency"] = {{"max", 1.5}};
  EXPECT_NE(error(j).find("key 'gemm_efficiency.max' is a fraction"), std::string::npos)
      << error(j);
  j = cluster_json();
  j["device"]["launch_us"] = -1;
  EXPECT_NE(error(j).find("key 'device.launch_us' must be a non-negative number"),
            std::string::npos)
      << error(j);
  j = cluster_json();
  j["nodes"] = 0;
  EXPECT_NE(error(j).find("key 'nodes' must be at least 1"), std::string::npos) << error(j);
  EXPECT_NE(error_of([] {
              ClusterSpec::load("/nonexistent/cluster.json");
            }).find("/nonexistent/cluster.json"),
            std::string::npos);
}

TEST(ClusterSpec, RingAlphaBeta) {
  const ClusterSpec c = ClusterSpec::from_json(cluster_json(), "c.json");
  const double bytes = 1e9, bw = 250e9 * 0.8, lat = 2e-6;  // intra: default efficiency 0.8
  for (int p : {2, 4, 8}) {
    EXPECT_NEAR(c.collective_seconds(CollectiveKind::kAllReduce, bytes, p, Link::kIntraNode),
                2.0 * (p - 1) / p * bytes / bw + 2 * (p - 1) * lat, 1e-15);
    EXPECT_NEAR(c.collective_seconds(CollectiveKind::kReduceScatter, bytes, p, Link::kIntraNode),
                double(p - 1) / p * bytes / bw + (p - 1) * lat, 1e-15);
    EXPECT_NEAR(c.collective_seconds(CollectiveKind::kAllToAll, bytes, p, Link::kIntraNode),
                double(p - 1) / p * bytes / bw + (p - 1) * lat, 1e-15);
    // All-gather's payload is one shard: each rank receives p - 1 of them.
    EXPECT_NEAR(c.collective_seconds(CollectiveKind::kAllGather, bytes, p, Link::kIntraNode),
                (p - 1) * bytes / bw + (p - 1) * lat, 1e-15);
  }
  // An all-reduce moves what a reduce-scatter plus an all-gather of its shard move.
  const double p = 8;
  EXPECT_NEAR(c.collective_seconds(CollectiveKind::kAllReduce, bytes, 8, Link::kInterNode),
              c.collective_seconds(CollectiveKind::kReduceScatter, bytes, 8, Link::kInterNode) +
                  c.collective_seconds(CollectiveKind::kAllGather, bytes / p, 8, Link::kInterNode),
              1e-12);
  EXPECT_NEAR(c.p2p_seconds(bytes, Link::kInterNode), 5e-6 + bytes / 25e9, 1e-15);
  EXPECT_EQ(c.collective_seconds(CollectiveKind::kAllReduce, bytes, 1, Link::kIntraNode), 0);
}

TEST(ClusterSpec, GemmIsARooflineWithASaturatingEfficiency) {
  const ClusterSpec c = ClusterSpec::from_json(cluster_json(), "c.json");
  // A large square bf16 GEMM runs near the efficiency ceiling (0.8).
  const double big = 2.0 * 8192 * 8192 * 8192;
  EXPECT_NEAR(c.gemm_efficiency(big), 0.8 * big / (big + 1e9), 1e-12);
  EXPECT_GT(c.gemm_efficiency(big), 0.79);
  EXPECT_NEAR(c.gemm_seconds(1, 8192, 8192, 8192, Precision::kBF16, 1),
              big / (300e12 * c.gemm_efficiency(big)), 1e-12);
  // Efficiency grows with size.
  EXPECT_LT(c.gemm_efficiency(2.0 * 512 * 512 * 512), c.gemm_efficiency(2.0 * 2048 * 2048 * 2048));
  // A GEMM with k = 1 is memory-bound: (m k + k n + m n) elements over the bandwidth.
  const double traffic = (4096.0 + 4096 + 4096.0 * 4096) * 2;
  EXPECT_NEAR(c.gemm_seconds(1, 4096, 4096, 1, Precision::kBF16, 1), traffic / (2000e9 * 0.8),
              1e-15);
  EXPECT_EQ(c.gemm_seconds(1, 0, 4, 4, Precision::kF32, 1), 0);
}

// A shipped cluster file cut in half, and one with a corrupted value, fail
// naming the file.
// Fused attention on a cluster: its node FLOPs (FlashAttention's count, the
// backward 2.5 forwards) at the peak times attention_efficiency (default
// 0.34, FlashAttention-2 on H100), never below its bytes at memory bandwidth.
TEST(ClusterSpec, AttentionRunsAtTheAttentionEfficiency) {
  json j = cluster_json();
  const ClusterSpec c = ClusterSpec::from_json(j, "c.json");
  EXPECT_DOUBLE_EQ(c.data().attention_efficiency, kDefaultAttentionEfficiency);
  const double flops = 1e14;
  EXPECT_DOUBLE_EQ(c.kernel_seconds("attention", 1e6, flops, Precision::kBF16, 1),
                   flops / (300e12 * 0.34));
  EXPECT_DOUBLE_EQ(c.kernel_seconds("attention_grad", 1e6, 2.5 * flops, Precision::kBF16, 1),
                   2.5 * flops / (300e12 * 0.34));
  EXPECT_DOUBLE_EQ(c.kernel_seconds("attention", 1e12, 1e6, Precision::kBF16, 1),
                   c.memory_seconds(1e12, 1));
  EXPECT_DOUBLE_EQ(c.kernel_seconds("softmax", 1e6, flops, Precision::kBF16, 1),
                   flops / 300e12);  // other kinds: the roofline at the peak
  j["device"]["attention_efficiency"] = 0.68;
  const ClusterSpec twice = ClusterSpec::from_json(j, "c.json");
  EXPECT_DOUBLE_EQ(twice.kernel_seconds("attention", 1e6, flops, Precision::kBF16, 1),
                   c.kernel_seconds("attention", 1e6, flops, Precision::kBF16, 1) / 2);
  j["device"]["attention_efficiency"] = 1.5;
  const std::string e = error_of([&] { ClusterSpec::from_json(j, "c.json"); });
  EXPECT_NE(e.find("device.attention_efficiency"), std::string::npos) << e;
}

TEST(ClusterSpec, TruncatedOrCorruptedFilesFailNamingTheFile) {
  const fs::path source =
      fs::path(TESSEL_SOURCE_DIR) / "examples" / "clusters" / "dgx-h100-32.json";
  std::ifstream in(source);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path dir = fs::temp_directory_path() / ("tessel_cluster_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path truncated = dir / "truncated.json", corrupted = dir / "corrupted.json";
  std::ofstream(truncated) << text.substr(0, text.size() / 2);
  std::string bad = text;
  const size_t at = bad.find("\"nodes\"");
  ASSERT_NE(at, std::string::npos);
  bad.replace(bad.find(':', at), 2, ": -");  // a negative node count
  std::ofstream(corrupted) << bad;
  const std::string e1 = error_of([&] { ClusterSpec::load(truncated.string()); });
  EXPECT_NE(e1.find(truncated.string() + ": not valid JSON"), std::string::npos) << e1;
  const std::string e2 = error_of([&] { ClusterSpec::load(corrupted.string()); });
  EXPECT_NE(e2.find(corrupted.string()), std::string::npos) << e2;
  EXPECT_NE(e2.find("nodes"), std::string::npos) << e2;
  fs::remove_all(dir);
}

TEST(ClusterSpec, ShippedExamplesParse) {
  const fs::path dir = fs::path(TESSEL_SOURCE_DIR) / "examples" / "clusters";
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const ClusterSpec c = ClusterSpec::load(entry.path().string());
    EXPECT_EQ(c.devices_per_node(), 8) << entry.path();
    EXPECT_GT(c.data().intra_node.bandwidth_gbs, c.data().inter_node.bandwidth_gbs) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 2);
}

TEST(ClusterSpec, PublishedRunsAreTesselConfigsOnShippedClusters) {
  const fs::path root(TESSEL_SOURCE_DIR);
  int files = 0;
  for (const auto& entry : fs::directory_iterator(root / "examples" / "published")) {
    if (entry.path().extension() != ".json") continue;
    json j = json::parse(std::ifstream(entry.path()));
    ASSERT_TRUE(j.contains("published")) << entry.path();
    const json published = j["published"];
    j.erase("published");
    // The model keys are valid config keys. (validate() is not called: it
    // requires vocab 256, the byte-level data sets; the planner needs no data.)
    const TrainConfig config = TrainConfig::from_json(j);
    EXPECT_EQ(config.d_model % config.n_head, 0) << entry.path();
    const ClusterSpec cluster =
        ClusterSpec::load((root / published["cluster"].get<std::string>()).string());
    int64_t mesh = 1;
    for (const auto& [axis, size] : published["mesh"].items()) mesh *= size.get<int64_t>();
    EXPECT_EQ(mesh, published["gpus"].get<int64_t>()) << entry.path();
    EXPECT_LE(mesh, cluster.total_devices()) << entry.path();
    EXPECT_EQ(config.batch % published["mesh"].value("data", int64_t{1}), 0) << entry.path();
    const char* throughput =
        published.contains("tflops_per_gpu") ? "tflops_per_gpu" : "tokens_per_s_per_gpu";
    EXPECT_GT(published.value(throughput, 0.0), 0) << entry.path();
    ++files;
  }
  EXPECT_GE(files, 3);
}

}  // namespace
}  // namespace tessel::plan
