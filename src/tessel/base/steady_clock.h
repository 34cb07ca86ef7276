// Seconds on the monotonic clock (std::chrono::steady_clock), for timing
// intervals: only differences between two readings mean anything.
#pragma once

#include <chrono>

namespace tessel {

inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds from `start` to now.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tessel
