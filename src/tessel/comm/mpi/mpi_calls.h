// Internal to comm/mpi: checked MPI calls and the scope that tells the
// watchdog a blocking call is in flight. Every MPI call in Tessel goes through
// check_mpi so that a failure names the call, group, op and element count.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel::mpi_detail {

// The watchdog's default limit on one blocking call (TESSEL_COMM_TIMEOUT_S).
inline constexpr double kDefaultTimeoutS = 300;

std::string mpi_error_string(int code);
bool mpi_finalized();

// Throws a tessel::Error naming the call, group, op and element count.
void check_mpi(int code, const char* collective, const std::string& group, const std::string& op,
               int64_t n);

// Tells the watchdog that a blocking MPI call is in flight for its lifetime.
class WatchScope {
 public:
  WatchScope(const char* collective, const std::string& group, const std::string& op, int64_t n)
      : runtime_(MpiRuntime::instance()) {
    if (runtime_.watchdog_enabled()) runtime_.begin_blocking(collective, group, op, n);
  }
  ~WatchScope() {
    if (runtime_.watchdog_enabled()) runtime_.end_blocking();
  }
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;

 private:
  MpiRuntime& runtime_;
};

}  // namespace tessel::mpi_detail
