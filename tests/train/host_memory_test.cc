// The host memory check before a run allocates (train/host_memory.h): this
// host's memory is read, a rank larger than the host is refused naming both
// figures, ranks that together may not fit get a warning, and on a GPU only
// the host buffers count.
#include "tessel/train/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/error_of.h"

namespace tessel {
namespace {

RankMemory rank_of(int64_t device_bytes, int64_t host_bytes) {
  RankMemory m;
  m.rank = 3;
  m.parameters = device_bytes;
  m.host.optimizer = host_bytes;
  return m;
}

TEST(HostMemory, ThisHostsMemoryIsReadAndAtMostItsPhysicalMemory) {
  const int64_t bytes = host_memory_bytes();
  ASSERT_GT(bytes, 0);
  EXPECT_LE(bytes, int64_t{sysconf(_SC_PHYS_PAGES)} * sysconf(_SC_PAGE_SIZE));
}

TEST(HostMemory, ARankLargerThanTheHostIsRefusedNamingBoth) {
  const int64_t mib = 1 << 20;
  const std::string error =
      error_of([&] { check_host_memory(rank_of(900 * mib, 200 * mib), "cpu", 1, 1000 * mib); });
  EXPECT_NE(error.find("rank 3 needs 1100.00 MiB of memory"), std::string::npos) << error;
  EXPECT_NE(error.find("more than this host has: 1000.00 MiB"), std::string::npos) << error;
  EXPECT_NE(error.find("--dry-run"), std::string::npos) << error;
  // On a GPU the device's bytes are the backend's: only the 200 MiB of host buffers count.
  EXPECT_EQ(check_host_memory(rank_of(900 * mib, 200 * mib), "cuda", 1, 1000 * mib), "");
  EXPECT_NE(error_of([&] {
              check_host_memory(rank_of(0, 1200 * mib), "cuda", 1, 1000 * mib);
            }).find("of host memory (pinned buffers)"),
            std::string::npos);
}

TEST(HostMemory, RanksThatTogetherMayNotFitAreWarnedAbout) {
  const int64_t mib = 1 << 20;
  EXPECT_EQ(check_host_memory(rank_of(300 * mib, 0), "cpu", 3, 1000 * mib), "");
  const std::string warning = check_host_memory(rank_of(300 * mib, 0), "cpu", 4, 1000 * mib);
  EXPECT_NE(warning.find("4 ranks share this host"), std::string::npos) << warning;
  EXPECT_NE(warning.find("1200.00 MiB against the host's 1000.00 MiB"), std::string::npos)
      << warning;
  EXPECT_EQ(check_host_memory(rank_of(300 * mib, 0), "cpu", 4, -1), "") << "unknown: no check";
}

}  // namespace
}  // namespace tessel
