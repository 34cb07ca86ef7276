// The host memory check before a run allocates (train/host_memory.h): this
// host's memory and cgroup limits are read, a rank larger than the host and
// ranks that together are larger are refused naming the figures, and on a
// GPU only the host buffers count. The gather over ranks: tests/mpi.
#include "tessel/train/host_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "tessel/comm/communicator.h"

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

TEST(HostMemory, CgroupLimitsAreReadAndUnsetOnesIgnored) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessel-cgroup-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto limit_in = [&](const std::string& text) {
    std::ofstream(dir / "limit") << text;
    return cgroup_limit_bytes((dir / "limit").string());
  };
  EXPECT_EQ(limit_in("8589934592\n"), int64_t{8} << 30) << "v2 memory.max, a limit";
  EXPECT_EQ(limit_in("max\n"), -1) << "v2: no limit";
  EXPECT_EQ(limit_in("9223372036854771712\n"), -1) << "v1: no limit is a huge number";
  EXPECT_EQ(limit_in("lots\n"), -1);
  EXPECT_EQ(cgroup_limit_bytes((dir / "missing").string()), -1);
  std::filesystem::remove_all(dir);
}

TEST(HostMemory, ARankLargerThanTheHostIsRefusedNamingBoth) {
  const int64_t mib = 1 << 20;
  const RankMemory m = rank_of(900 * mib, 200 * mib);
  const std::string error = error_of([&] {
    check_host_memory(m, "cpu", {1, 1100 * mib}, 1000 * mib);
  });
  EXPECT_NE(error.find("rank 3 needs 1100.00 MiB of memory"), std::string::npos) << error;
  EXPECT_NE(error.find("more than this host has: 1000.00 MiB"), std::string::npos) << error;
  EXPECT_NE(error.find("--dry-run"), std::string::npos) << error;
  // On a GPU the device's bytes are the backend's: only the 200 MiB of host buffers count.
  EXPECT_NO_THROW(check_host_memory(m, "cuda", {1, 200 * mib}, 1000 * mib));
  EXPECT_NE(error_of([&] {
              check_host_memory(rank_of(0, 1200 * mib), "cuda", {1, 1200 * mib}, 1000 * mib);
            }).find("of host memory (pinned buffers)"),
            std::string::npos);
}

TEST(HostMemory, RanksThatTogetherExceedTheHostAreRefused) {
  const int64_t mib = 1 << 20;
  const RankMemory m = rank_of(300 * mib, 0);
  EXPECT_NO_THROW(check_host_memory(m, "cpu", {3, 1000 * mib}, 1000 * mib)) << "exactly full";
  const std::string error = error_of([&] {
    check_host_memory(m, "cpu", {4, 1001 * mib}, 1000 * mib);
  });
  EXPECT_NE(error.find("the 4 ranks on this host need 1001.00 MiB of memory together (rank 3: "
                       "300.00 MiB"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("more than this host has: 1000.00 MiB"), std::string::npos) << error;
  EXPECT_NO_THROW(check_host_memory(m, "cpu", {4, 1001 * mib}, -1)) << "unknown: no check";
}

TEST(HostMemory, OneProcessSharesItsHostWithNobody) {
  auto self = make_self_communicator("world");
  const int64_t bytes = (int64_t{5} << 40) + 12345;  // needs every one of the 16-bit parts
  const HostShare share = share_of_this_host(*self, bytes);
  EXPECT_EQ(share.ranks, 1);
  EXPECT_EQ(share.bytes, bytes);
}

}  // namespace
}  // namespace tessel
