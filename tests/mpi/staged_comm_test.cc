// StagedCommunicator under mpirun (any number of ranks), on the CPU backend,
// whose device memory is host memory: every f32 collective gives its
// documented results when calls are cut into pieces of 1, 3 and 1000
// elements; the bf16 calls equal the direct MPI calls bit for bit at every
// piece size; each call is counted once with the whole call's bytes; the
// staging is the pinned memory staging_bytes() says; point-to-point
// messages are refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/error_of.h"
#include "mpi/collective_checks.h"
#include "tessel/backend/backend.h"
#include "tessel/base/bf16.h"
#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/comm/staged_communicator.h"

namespace tessel {
namespace {

MpiRuntime& mpi() { return MpiRuntime::instance(); }

StagedCommunicator staged(const std::string& name, int64_t piece) {
  return StagedCommunicator(mpi().world(name), cpu_backend(), piece);
}

TEST(StagedCommunicator, GivesEveryCollectivesResultPieceByPiece) {
  for (int64_t piece : {1, 3, 1000}) {
    StagedCommunicator comm = staged("staged_" + std::to_string(piece), piece);
    for (int64_t n : {0, 1, 2, 3, 8, 1023, 4096}) check_collectives(comm, n);
  }
}

// Values whose bf16 rounding and f32 sums depend on every bit.
float value(int rank, int64_t i) { return (0.1f * (rank + 1) + 1e-3f * i) * (i % 3 ? 1.0f : 1e3f); }

TEST(StagedCommunicator, Bf16CallsEqualTheDirectCallsBitForBit) {
  auto direct = mpi().world("bf16_direct");
  const int p = direct->size(), me = direct->rank();
  for (int64_t piece : {1, 5, 4096}) {
    StagedCommunicator comm = staged("bf16_staged", piece);
    for (int64_t n : {1, 7, 64, 1001}) {
      std::vector<float> a(n * p), b(n * p), out_a(n, -1), out_b(n, -1);
      for (int64_t i = 0; i < n * p; ++i) a[i] = b[i] = value(me, i);
      std::vector<uint8_t> work(
          std::max(all_reduce_bf16_work_bytes(n * p, p), reduce_scatter_bf16_work_bytes(n, p)));
      direct->reduce_scatter_bf16(a.data(), out_a.data(), n, work.data(), "x");
      comm.reduce_scatter_bf16(b.data(), out_b.data(), n, nullptr, "x");
      EXPECT_EQ(std::memcmp(out_a.data(), out_b.data(), n * 4), 0) << "reduce_scatter n " << n;
      direct->all_reduce_bf16(a.data(), n * p, work.data(), "x");
      comm.all_reduce_bf16(b.data(), n * p, nullptr, "x");
      EXPECT_EQ(std::memcmp(a.data(), b.data(), n * p * 4), 0) << "all_reduce n " << n;
      std::vector<uint16_t> in(n), gathered_a(n * p), gathered_b(n * p);
      for (int64_t i = 0; i < n; ++i) in[i] = f32_to_bf16_bits(value(me, i));
      direct->all_gather_bf16(in.data(), gathered_a.data(), n, "x");
      comm.all_gather_bf16(in.data(), gathered_b.data(), n, "x");
      EXPECT_EQ(gathered_a, gathered_b) << "all_gather n " << n;
    }
  }
}

TEST(StagedCommunicator, CountsEachCallOnceWithItsWholeBytes) {
  StagedCommunicator comm = staged("staged_counts", 3);
  const int p = comm.size();
  std::vector<float> data(10 * p), out(10 * p);
  comm.all_reduce(data.data(), 10, ReduceKind::kSum, "x");
  comm.start_all_reduce(data.data(), 10, "x")->wait();
  comm.reduce_scatter(data.data(), out.data(), 10, "x");
  const auto& counts = comm.stats().at("staged_counts");
  EXPECT_EQ(counts.at("all_reduce").calls, 2);
  EXPECT_EQ(counts.at("all_reduce").bytes, 2 * 10 * 4);
  EXPECT_EQ(counts.at("reduce_scatter").calls, 1);
  EXPECT_EQ(counts.at("reduce_scatter").bytes, p * 10 * 4);
}

TEST(StagedCommunicator, StagesThroughFixedPinnedMemory) {
  const int64_t before = cpu_backend().space_stats(MemorySpace::kPinnedHost).live_bytes;
  {
    StagedCommunicator comm = staged("staged_memory", 100);
    EXPECT_EQ(cpu_backend().space_stats(MemorySpace::kPinnedHost).live_bytes - before,
              static_cast<int64_t>(StagedCommunicator::staging_bytes(comm.size(), 100)));
    std::vector<float> data(100000);
    comm.all_reduce(data.data(), 100000, ReduceKind::kSum, "x");  // 1000 pieces, no growth
    EXPECT_EQ(cpu_backend().space_stats(MemorySpace::kPinnedHost).live_bytes - before,
              static_cast<int64_t>(StagedCommunicator::staging_bytes(comm.size(), 100)));
  }
  EXPECT_EQ(cpu_backend().space_stats(MemorySpace::kPinnedHost).live_bytes, before);
}

TEST(StagedCommunicator, RefusesPointToPointByName) {
  StagedCommunicator comm = staged("staged_p2p", 8);
  float x = 0;
  EXPECT_NE(error_of([&] { comm.start_send(&x, 1, 0, 7, "stage0 -> stage1"); })
                .find("send on group 'staged_p2p' (op 'stage0 -> stage1'): a staged "
                      "communicator carries collectives only"),
            std::string::npos);
  EXPECT_NE(error_of([&] { comm.recv(&x, 1, 0, 7, "y"); }).find("recv on group 'staged_p2p'"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel
