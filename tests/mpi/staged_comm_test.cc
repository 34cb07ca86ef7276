// StagedCommunicator under mpirun (any number of ranks), on the CPU backend,
// whose device memory is host memory: every f32 collective gives its
// documented results when calls are cut into pieces of 1, 3 and 1000
// elements; sums started without blocking land whole, however their pieces
// interleave with other sums and with blocking calls; the bf16 calls equal the direct MPI calls bit
// for bit at every piece size; each call is counted once with the whole call's bytes; the staging
// is the pinned memory staging_bytes() says; point-to-point messages are refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
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

// Three sums in flight at once (pieces of 3, so they share the two slots),
// progressed by test() on the last, then a blocking all-gather, which must
// land the rest first, then the requests waited in reverse.
TEST(StagedCommunicator, StartedSumsLandWholeAcrossPiecesAndBlockingCalls) {
  StagedCommunicator comm = staged("staged_started", 3);
  const int p = comm.size(), me = comm.rank();
  const float ranks_sum = float(p * (p + 1) / 2);
  std::vector<std::vector<float>> data;
  for (int64_t n : {10, 1, 7}) {
    data.emplace_back(n);
    for (int64_t i = 0; i < n; ++i) data.back()[i] = float((me + 1) * (i + data.size()));
  }
  std::vector<std::unique_ptr<CommRequest>> requests;
  for (auto& d : data) requests.push_back(comm.start_all_reduce(d.data(), d.size(), "sum"));
  for (int tries = 0; tries < 3; ++tries) requests.back()->test();
  std::vector<float> mine(2, float(me)), gathered(2 * p, -1);
  comm.all_gather(mine.data(), gathered.data(), 2, "gather");
  for (int r = 0; r < p; ++r) EXPECT_EQ(gathered[2 * r + 1], float(r));
  for (auto it = requests.rbegin(); it != requests.rend(); ++it) {
    (*it)->wait();
    EXPECT_TRUE((*it)->test());
  }
  for (size_t k = 0; k < data.size(); ++k)
    for (size_t i = 0; i < data[k].size(); ++i)
      EXPECT_EQ(data[k][i], ranks_sum * float(i + k + 1)) << "sum " << k << " [" << i << "]";
  // A request waited alone lands whole too, and an empty one is done at once.
  std::vector<float> more(8, float(me + 1));
  comm.start_all_reduce(more.data(), 8, "sum")->wait();
  EXPECT_EQ(more, std::vector<float>(8, ranks_sum));
  EXPECT_TRUE(comm.start_all_reduce(nullptr, 0, "empty")->test());
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
