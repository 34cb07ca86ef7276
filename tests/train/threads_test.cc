// The default intra-op thread count of a rank: its share of the host's
// cores, so N ranks on one host do not each start a thread per core.
#include "tessel/train/threads.h"

#include <gtest/gtest.h>

namespace tessel {
namespace {

TEST(DefaultThreads, EachRankGetsItsShareOfTheHostsCores) {
  EXPECT_EQ(default_threads(2, 1), 2);  // one process: every core
  EXPECT_EQ(default_threads(2, 2), 1);  // mpirun -n 2 on 2 cores
  EXPECT_EQ(default_threads(2, 4), 1);  // more ranks than cores: never 0
  EXPECT_EQ(default_threads(16, 4), 4);
  EXPECT_EQ(default_threads(16, 3), 5);
  EXPECT_EQ(default_threads(8, 0), 8);  // no launcher: one rank
  EXPECT_EQ(default_threads(0, 1), 1);  // a host that reports no cores
}

TEST(DefaultThreads, LocalRanksComeFromOpenMpisLocalSize) {
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_EQ(local_rank_count(), 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  EXPECT_EQ(local_rank_count(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "junk", 1);
  EXPECT_EQ(local_rank_count(), 1);
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

}  // namespace
}  // namespace tessel
