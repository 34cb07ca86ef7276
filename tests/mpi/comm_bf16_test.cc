// The bf16 collectives (Communicator::all_gather_bf16, all_reduce_bf16,
// reduce_scatter_bf16) under mpirun with any number of ranks: the gather
// moves the bits unchanged; the all-reduce equals, on every rank and bit for
// bit, rounding each rank's values to bf16, adding them in f32 in rank order
// and rounding the sum (so replicas never drift); the reduce-scatter gives
// each rank the f32 sum, in rank order, of every rank's bf16-rounded block;
// all count 2 bytes per element.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/comm/communicator.h"
#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel {
namespace {

MpiRuntime& mpi() { return MpiRuntime::instance(); }

// A value no bf16 holds exactly, different per rank and element.
float value(int rank, int64_t i) { return 0.1f * static_cast<float>(rank + 1) + 1e-3f * i; }

TEST(Bf16Collectives, AllGatherMovesTheBits) {
  auto world = mpi().world("bf16_gather");
  const int p = world->size(), me = world->rank();
  const int64_t n = 37;
  std::vector<uint16_t> in(n), out(n * p, 0);
  for (int64_t i = 0; i < n; ++i) in[i] = f32_to_bf16_bits(value(me, i));
  world->all_gather_bf16(in.data(), out.data(), n, "x");
  for (int r = 0; r < p; ++r)
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(out[r * n + i], f32_to_bf16_bits(value(r, i))) << "rank " << r << " i " << i;
  EXPECT_EQ(world->stats().at("bf16_gather").at("all_gather").bytes, n * 2);
}

TEST(Bf16Collectives, AllReduceSumsInF32InRankOrder) {
  auto world = mpi().world("bf16_reduce");
  const int p = world->size(), me = world->rank();
  // Lengths that do and do not divide by the rank count, and fewer than it.
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{1001}}) {
    std::vector<float> data(n);
    for (int64_t i = 0; i < n; ++i) data[i] = value(me, i);
    std::vector<uint8_t> work(all_reduce_bf16_work_bytes(n, p));
    world->all_reduce_bf16(data.data(), n, work.data(), "x");
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int r = 0; r < p; ++r) acc += bf16_bits_to_f32(f32_to_bf16_bits(value(r, i)));
      const float want = bf16_bits_to_f32(f32_to_bf16_bits(acc));
      EXPECT_EQ(std::memcmp(&data[i], &want, 4), 0)
          << "n " << n << " i " << i << ": " << data[i] << " vs " << want;
    }
  }
  const CollectiveCount& c = world->stats().at("bf16_reduce").at("all_reduce");
  EXPECT_EQ(c.calls, 4);
  EXPECT_EQ(c.bytes, (1 + 7 + 64 + 1001) * 2);
}

// Every rank's result, gathered: the same bits everywhere.
TEST(Bf16Collectives, AllReduceLeavesEveryRankWithTheSameBits) {
  auto world = mpi().world("bf16_replicas");
  const int p = world->size(), me = world->rank();
  const int64_t n = 515;
  std::vector<float> data(n);
  // Values whose f32 sum depends on the order of the additions.
  for (int64_t i = 0; i < n; ++i)
    data[i] = (i % 3 == 0 ? 1e4f : 1e-3f) * value(me, i) * (me % 2 ? -1.0f : 1.0f);
  std::vector<uint8_t> work(all_reduce_bf16_work_bytes(n, p));
  world->all_reduce_bf16(data.data(), n, work.data(), "x");
  std::vector<float> every(n * p);
  world->all_gather(data.data(), every.data(), n, "check");
  for (int r = 0; r < p; ++r)
    EXPECT_EQ(std::memcmp(&every[r * n], data.data(), n * sizeof(float)), 0)
        << "rank " << r << " ended with other values than rank " << me;
}

TEST(Bf16Collectives, ReduceScatterSumsInF32InRankOrder) {
  auto world = mpi().world("bf16_scatter");
  const int p = world->size(), me = world->rank();
  for (int64_t n : {int64_t{1}, int64_t{33}, int64_t{256}}) {
    std::vector<float> in(n * p), out(n, -1.0f);
    for (int64_t i = 0; i < n * p; ++i) in[i] = value(me, i);
    std::vector<uint8_t> work(reduce_scatter_bf16_work_bytes(n, p));
    world->reduce_scatter_bf16(in.data(), out.data(), n, work.data(), "x");
    for (int64_t i = 0; i < n; ++i) {
      float want = 0.0f;  // my block: element me*n + i of every rank, in rank order
      for (int r = 0; r < p; ++r) want += bf16_bits_to_f32(f32_to_bf16_bits(value(r, me * n + i)));
      EXPECT_EQ(std::memcmp(&out[i], &want, 4), 0)
          << "n " << n << " i " << i << ": " << out[i] << " vs " << want;
    }
  }
  const CollectiveCount& c = world->stats().at("bf16_scatter").at("reduce_scatter");
  EXPECT_EQ(c.calls, 3);
  EXPECT_EQ(c.bytes, int64_t{p} * (1 + 33 + 256) * 2);
}

TEST(Bf16Collectives, SelfCommunicatorRoundsOnce) {
  auto self = make_self_communicator("bf16_self");
  std::vector<float> data = {0.1f, 1.0f, -3.3f};
  std::vector<uint8_t> work(all_reduce_bf16_work_bytes(3, 1));
  self->all_reduce_bf16(data.data(), 3, work.data(), "x");
  EXPECT_EQ(data[0], bf16_bits_to_f32(f32_to_bf16_bits(0.1f)));
  EXPECT_EQ(data[1], 1.0f);
  EXPECT_EQ(self->stats().at("bf16_self").at("all_reduce").bytes, 3 * 2);
  std::vector<uint16_t> in = {1, 2, 3}, out(3);
  self->all_gather_bf16(in.data(), out.data(), 3, "x");
  EXPECT_EQ(out, in);
  EXPECT_EQ(self->stats().at("bf16_self").at("all_gather").bytes, 3 * 2);
  std::vector<float> scattered(3);
  std::vector<uint8_t> scatter_work(reduce_scatter_bf16_work_bytes(3, 1));
  const std::vector<float> values = {0.1f, 1.0f, -3.3f};
  self->reduce_scatter_bf16(values.data(), scattered.data(), 3, scatter_work.data(), "x");
  EXPECT_EQ(scattered[0], bf16_bits_to_f32(f32_to_bf16_bits(0.1f)));
  EXPECT_EQ(scattered[1], 1.0f);
  EXPECT_EQ(self->stats().at("bf16_self").at("reduce_scatter").bytes, 3 * 2);
}

}  // namespace
}  // namespace tessel
