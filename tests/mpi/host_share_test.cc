// share_of_this_host over real ranks (train/host_memory.h): every rank of
// this one host is counted and their bytes summed exactly, on every rank.
#include <gtest/gtest.h>

#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/train/host_memory.h"

namespace tessel {
namespace {

TEST(HostShare, EveryRankOfThisHostIsSummedExactly) {
  MpiRuntime& mpi = MpiRuntime::instance();
  auto world = mpi.world("world");
  auto bytes_of_rank = [](int r) { return (int64_t{r + 1} << 41) + 4097 * r + 1; };
  const HostShare share = share_of_this_host(*world, bytes_of_rank(mpi.world_rank()));
  int64_t sum = 0;
  for (int r = 0; r < mpi.world_size(); ++r) sum += bytes_of_rank(r);
  EXPECT_EQ(share.ranks, mpi.world_size()) << "mpirun runs every rank on this host";
  EXPECT_EQ(share.bytes, sum);
}

}  // namespace
}  // namespace tessel
