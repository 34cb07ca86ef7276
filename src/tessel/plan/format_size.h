// Byte counts as the planner prints them: GiB from 1 GiB up (a 175B
// model's peak reads 185.48 GiB, not 189933.66 MiB), MiB below, two decimals.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace tessel::plan {

inline std::string format_size(int64_t bytes) {
  const double gib = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  char buf[32];
  if (gib >= 1)
    std::snprintf(buf, sizeof buf, "%.2f GiB", gib);
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace tessel::plan
