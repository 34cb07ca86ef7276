#include "tessel/train/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <vector>

#include "tessel/base/error.h"

namespace tessel {
namespace {

// One rank's record in the gather: its host name, a character a float, then
// its bytes in four 16-bit parts (each exact in a float).
constexpr int kNameChars = 64;
constexpr int kRecord = kNameChars + 4;

std::array<float, kRecord> record_of(int64_t bytes) {
  std::array<char, kNameChars + 1> name{};
  if (gethostname(name.data(), kNameChars) != 0) name[0] = '\0';
  std::array<float, kRecord> r{};
  for (int i = 0; i < kNameChars; ++i) r[i] = static_cast<unsigned char>(name[i]);
  const auto u = static_cast<uint64_t>(std::max<int64_t>(bytes, 0));
  for (int part = 0; part < 4; ++part) r[kNameChars + part] = (u >> (16 * part)) & 0xffff;
  return r;
}

int64_t bytes_of(const float* record) {
  uint64_t u = 0;
  for (int part = 0; part < 4; ++part)
    u |= static_cast<uint64_t>(record[kNameChars + part]) << (16 * part);
  return static_cast<int64_t>(u);
}

}  // namespace

int64_t cgroup_limit_bytes(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1;
  try {
    const long long v = std::stoll(text);
    return v > 0 && v < (int64_t{1} << 60) ? v : -1;
  } catch (const std::exception&) {
    return -1;
  }
}

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page > 0 ? int64_t{pages} * page : -1;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t limit = cgroup_limit_bytes(path);
    if (limit > 0) bytes = bytes < 0 ? limit : std::min(bytes, limit);
  }
  return bytes;
}

int64_t host_bytes_of(const RankMemory& m, const std::string& device) {
  return device == "cpu" ? m.total() : m.host.total();
}

HostShare share_of_this_host(Communicator& world, int64_t bytes) {
  const std::array<float, kRecord> mine = record_of(bytes);
  std::vector<float> all(static_cast<size_t>(kRecord) * world.size());
  world.all_gather(mine.data(), all.data(), kRecord, "host memory check");
  HostShare share{0, 0};
  for (size_t at = 0; at < all.size(); at += kRecord)
    if (std::equal(mine.begin(), mine.begin() + kNameChars, all.begin() + at))
      ++share.ranks, share.bytes += bytes_of(all.data() + at);
  return share;
}

void check_host_memory(const RankMemory& m, const std::string& device, const HostShare& share,
                       int64_t host_bytes) {
  if (host_bytes <= 0) return;
  const int64_t need = host_bytes_of(m, device);
  const std::string what = device == "cpu" ? "memory" : "host memory (pinned buffers)";
  const std::string remedies =
      "; `tessel train --dry-run` prints every rank's figures, and a higher --zero, "
      "--recompute blocks, more ranks on more hosts or a smaller model or batch lowers them";
  if (need > host_bytes)
    TS_THROW("rank ", m.rank, " needs ", format_bytes(need), " of ", what, " (",
             memory_breakdown(m), "), more than this host has: ", format_bytes(host_bytes),
             remedies);
  if (share.bytes > host_bytes)
    TS_THROW("the ", share.ranks, " ranks on this host need ", format_bytes(share.bytes), " of ",
             what, " together (rank ", m.rank, ": ", format_bytes(need), ", ", memory_breakdown(m),
             "), more than this host has: ", format_bytes(host_bytes), remedies);
}

}  // namespace tessel
