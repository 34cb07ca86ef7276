#include "tessel/train/host_memory.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "tessel/base/error.h"

namespace tessel {
namespace {

// A cgroup limit file's value: bytes, or -1 for "max", an unset v1 limit
// (a huge number) or a file that is not there.
int64_t cgroup_limit(const char* path) {
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

}  // namespace

int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  int64_t bytes = pages > 0 && page > 0 ? int64_t{pages} * page : -1;
  for (const char* path :
       {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t limit = cgroup_limit(path);
    if (limit > 0) bytes = bytes < 0 ? limit : std::min(bytes, limit);
  }
  return bytes;
}

int64_t host_bytes_of(const RankMemory& m, const std::string& device) {
  return device == "cpu" ? m.total() : m.host.total();
}

std::string check_host_memory(const RankMemory& m, const std::string& device, int local_ranks,
                              int64_t host_bytes) {
  if (host_bytes <= 0) return "";
  const int64_t need = host_bytes_of(m, device);
  const std::string what = device == "cpu" ? "memory" : "host memory (pinned buffers)";
  const std::string remedies =
      "; `tessel train --dry-run` prints every rank's figures, and a higher --zero, "
      "--recompute blocks, more ranks on more hosts or a smaller model or batch lowers them";
  if (need > host_bytes)
    TS_THROW("rank ", m.rank, " needs ", format_bytes(need), " of ", what, " (",
             memory_breakdown(m), "), more than this host has: ", format_bytes(host_bytes),
             remedies);
  const int ranks = std::max(1, local_ranks);
  if (need * ranks <= host_bytes) return "";
  return str_cat("rank ", m.rank, " needs ", format_bytes(need), " of ", what, " and ", ranks,
                 " ranks share this host: if each needs as much, ", format_bytes(need * ranks),
                 " against the host's ", format_bytes(host_bytes),
                 "; the run may be killed for memory", remedies);
}

}  // namespace tessel
