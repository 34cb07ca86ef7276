// The op harness on the CUDA backend against the CPU backend.
//
// Every case of tests/common/op_cases.h is compiled twice, for the CPU
// backend and for backend_for("cuda"), fed the same inputs and parameters
// (on CUDA each parameter is copied into backend-allocated device memory
// and bound there), run, and every output and gradient compared:
//   |cuda - cpu| <= 1e-5 * max(|cuda|, |cpu|) + 1e-6
// (1e-5 relative, with a 1e-6 absolute floor for values near zero: the
// tolerance the CPU harness gives its fast kernels against the reference).
// Without a usable GPU every test that needs one skips, naming the probe's
// error. The coverage test reads only the kernel table and runs anywhere
// (so does cuda_einsum_mapping_test.cc).
// Written without a GPU: nothing here has run on one yet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <sstream>

#include "common/op_cases.h"
#include "tessel/backend/backend.h"
#include "tessel/backend/cuda/cuda_ops.h"
#include "tessel/base/error.h"
#include "tessel/comm/staged_communicator.h"
#include "tessel/ir/op_table.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

// The probe's error message, or "" where a GPU is usable.
const std::string& probe_error() {
  static const std::string error = [] {
    try {
      backend_for("cuda");
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  }();
  return error;
}

#define TS_REQUIRE_GPU() \
  if (!probe_error().empty()) GTEST_SKIP() << probe_error()

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-6 + 1e-5 * std::max(std::abs(a), std::abs(b));
}

// The harness's parameters in device memory of `backend`, bound into `p`,
// and its inputs written; the blocks live as long as the returned vector.
std::vector<DeviceMemory> feed_device(Harness& h, Program& p, Backend& backend) {
  std::vector<DeviceMemory> blocks;
  for (auto& [name, values] : h.param_values) {
    const size_t bytes = values.size() * sizeof(float);
    DeviceMemory m = backend.allocate(MemorySpace::kDevice, bytes);
    backend.copy_from_host(m.data(), values.data(), bytes);
    p.bind_param(name, reinterpret_cast<float*>(m.data()));
    blocks.push_back(std::move(m));
  }
  for (auto& [name, values] : h.int_inputs)
    p.write_input(name, values.data(), values.size() * sizeof(int32_t));
  p.write_input("harness.weights", h.weights.data(), h.weights.size() * sizeof(float));
  return blocks;
}

class CudaOpHarness : public ::testing::TestWithParam<OpCase> {};

TEST_P(CudaOpHarness, CudaMatchesCpu) {
  TS_REQUIRE_GPU();
  const OpCase& c = GetParam();
  Harness h = make_harness(c);
  for (const Node& n : h.graph.nodes())
    if (cuda_kernels_not_written_yet().count(n.kind))
      GTEST_SKIP() << op_name(n.kind) << " has no CUDA kernel yet (cuda_kernels_not_written_yet)";
  std::vector<ValueId> outputs = {h.out, h.loss};
  outputs.insert(outputs.end(), h.grads.begin(), h.grads.end());
  Program cpu(h.graph, outputs, CompileOptions{.backend = &cpu_backend()});
  Program gpu(h.graph, outputs, CompileOptions{.backend = &backend_for("cuda")});
  auto params_cpu = h.param_values;
  feed_harness(h, cpu, params_cpu);
  std::vector<DeviceMemory> device_params = feed_device(h, gpu, backend_for("cuda"));
  cpu.run();
  gpu.run();
  for (ValueId v : outputs) {
    const int64_t n = h.graph.node(v).shape.numel();
    const std::vector<float> a = gpu.read_f32(v);
    const std::vector<float> b = cpu.read_f32(v);
    for (int64_t e = 0; e < n; ++e)
      ASSERT_TRUE(close(a[e], b[e]))
          << c.name << ": value %" << v << " (" << h.graph.node(v).name << ") element " << e
          << ": cuda " << a[e] << " vs cpu " << b[e];
  }
  // A second run repeats the first bitwise (fixed algorithms, no atomics).
  std::vector<std::vector<float>> first;
  for (ValueId v : outputs) first.push_back(gpu.read_f32(v));
  gpu.run();
  for (size_t i = 0; i < outputs.size(); ++i)
    EXPECT_EQ(gpu.read_f32(outputs[i]), first[i])
        << c.name << ": value %" << outputs[i] << " changed between two runs";
}

INSTANTIATE_TEST_SUITE_P(AllOps, CudaOpHarness, ::testing::ValuesIn(op_cases()),
                         [](const auto& info) { return info.param.name; });

// Every instruction op kind has a CUDA kernel, except those refused by
// name until the collectives and local reshards are on CUDA and the explicit
// list cuda_kernels_not_written_yet(); the failure lists each kind without
// a kernel that is not listed, and each listed kind that has one (so the
// list shrinks as kernels land).
TEST(CudaKernelTable, EveryInstructionKindHasAKernel) {
  std::set<OpKind> allowed = {OpKind::kShardSlice, OpKind::kAllGather, OpKind::kReduceScatter,
                              OpKind::kAllReduce,  OpKind::kAllToAll,  OpKind::kZeroUnlessRoot};
  allowed.insert(cuda_kernels_not_written_yet().begin(), cuda_kernels_not_written_yet().end());
  const std::vector<OpKind> without = op_kinds_without_cuda_kernel();
  std::ostringstream missing, listed_but_present;
  for (OpKind kind : without)
    if (!allowed.count(kind)) missing << " " << op_name(kind);
  for (OpKind kind : cuda_kernels_not_written_yet())
    if (std::find(without.begin(), without.end(), kind) == without.end())
      listed_but_present << " " << op_name(kind);
  EXPECT_EQ(missing.str(), "") << "instruction op kinds with no CUDA kernel:" << missing.str();
  EXPECT_EQ(listed_but_present.str(), "")
      << "kinds listed in cuda_kernels_not_written_yet() that have a kernel:"
      << listed_but_present.str();
}

// The operations between kernels against the CPU backend's.
TEST(CudaBackendOps, RoundingAccumulationAndTheOptimizerMatchTheCpu) {
  TS_REQUIRE_GPU();
  Backend& gpu = backend_for("cuda");
  Backend& cpu = cpu_backend();
  const int64_t n = 100003;  // several sum-of-squares chunks, an odd tail
  std::vector<float> x(n), g(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::sin(0.37 * i) * (1 + i % 7);
    g[i] = std::cos(0.11 * i) * 1e-2f;
  }
  const size_t bytes = n * sizeof(float);
  auto put = [&](Backend& b, const std::vector<float>& v) {
    DeviceMemory m = b.allocate(MemorySpace::kDevice, bytes);
    b.copy_from_host(m.data(), v.data(), bytes);
    return m;
  };
  auto get = [&](Backend& b, const DeviceMemory& m) {
    std::vector<float> v(n);
    b.copy_to_host(v.data(), m.data(), bytes);
    return v;
  };
  // bf16 rounding: the same bits.
  DeviceMemory xg = put(gpu, x), bf = gpu.allocate(MemorySpace::kDevice, n * 2);
  DeviceMemory xc = put(cpu, x), bfc = cpu.allocate(MemorySpace::kDevice, n * 2);
  gpu.round_to_bf16(reinterpret_cast<float*>(xg.data()), reinterpret_cast<uint16_t*>(bf.data()), n);
  cpu.round_to_bf16(reinterpret_cast<float*>(xc.data()), reinterpret_cast<uint16_t*>(bfc.data()),
                    n);
  std::vector<uint16_t> r1(n), r2(n);
  gpu.copy_to_host(r1.data(), bf.data(), n * 2);
  cpu.copy_to_host(r2.data(), bfc.data(), n * 2);
  EXPECT_EQ(r1, r2);
  // Sum of squares (double; the order within a chunk differs from the CPU's).
  const double s1 = gpu.sum_of_squares(reinterpret_cast<float*>(xg.data()), n);
  const double s2 = cpu.sum_of_squares(reinterpret_cast<float*>(xc.data()), n);
  EXPECT_NEAR(s1, s2, 1e-12 * s2);
  EXPECT_EQ(s1, gpu.sum_of_squares(reinterpret_cast<float*>(xg.data()), n)) << "not repeatable";
  // AdamW, SGD and accumulate on the same state.
  std::vector<float> second_moment(n);  // non-negative
  for (int64_t i = 0; i < n; ++i) second_moment[i] = x[i] * x[i] * 1e-4f;
  DeviceMemory gg = put(gpu, g), mg = put(gpu, g), vg = put(gpu, second_moment);
  DeviceMemory gc = put(cpu, g), mc = put(cpu, g), vc = put(cpu, second_moment);
  for (Backend* b : {&gpu, &cpu}) {
    const bool on_gpu = b == &gpu;
    float* p = reinterpret_cast<float*>((on_gpu ? xg : xc).data());
    const float* gr = reinterpret_cast<float*>((on_gpu ? gg : gc).data());
    float* m = reinterpret_cast<float*>((on_gpu ? mg : mc).data());
    float* v = reinterpret_cast<float*>((on_gpu ? vg : vc).data());
    b->accumulate(m, gr, n);  // m = 2g
    b->adamw_update(p, gr, m, v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 3, 0.5f);
    b->sgd_update(p, gr, n, 1e-2f, 1e-4f, 2.0f);
  }
  for (auto [a, b] : {std::pair{&xg, &xc}, {&mg, &mc}, {&vg, &vc}}) {
    const std::vector<float> va = get(gpu, *a), vb = get(cpu, *b);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(close(va[i], vb[i]))
          << "element " << i << ": cuda " << va[i] << " vs cpu " << vb[i];
  }
}

// Collectives staged through pinned host memory move device memory intact:
// on one rank (the GPU machine has no MPI) each call's result is its input,
// piece by piece with a short last piece, in f32 and bf16.
TEST(CudaBackendOps, StagedCollectivesCarryDeviceMemoryThroughPinnedStaging) {
  TS_REQUIRE_GPU();
  Backend& gpu = backend_for("cuda");
  StagedCommunicator comm(make_self_communicator("staged_gpu"), gpu, 1000);
  const int64_t n = 2503;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.3 * i);
  const size_t bytes = n * sizeof(float);
  DeviceMemory a = gpu.allocate(MemorySpace::kDevice, bytes);
  DeviceMemory b = gpu.allocate(MemorySpace::kDevice, bytes);
  gpu.copy_from_host(a.data(), x.data(), bytes);
  float* da = reinterpret_cast<float*>(a.data());
  float* db = reinterpret_cast<float*>(b.data());
  comm.all_reduce(da, n, ReduceKind::kSum, "sum");
  comm.all_gather(da, db, n, "gather");
  comm.reduce_scatter(db, da, n, "scatter");
  comm.all_gather_bf16(reinterpret_cast<const uint16_t*>(da), reinterpret_cast<uint16_t*>(db),
                       2 * n, "gather bf16");  // the floats' bits as 2n bf16 halves
  // A started sum (three pieces, two in flight) lands whole in device memory.
  std::unique_ptr<CommRequest> started = comm.start_all_reduce(db, n, "started sum");
  started->test();
  started->wait();
  gpu.copy_to_host(y.data(), db, bytes);
  EXPECT_EQ(x, y);
}

}  // namespace
}  // namespace tessel
