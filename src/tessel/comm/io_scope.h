// IoScope: marks a stretch of file I/O (a checkpoint or trace write) on this
// rank, so that peers waiting for it in a collective do not count the time
// as a hang (see the watchdog in comm/mpi/mpi_runtime.h). A no-op without MPI.
#pragma once

#include <string>

namespace tessel {

class IoScope {
 public:
  explicit IoScope(const std::string& what);
  ~IoScope();
  IoScope(const IoScope&) = delete;
  IoScope& operator=(const IoScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace tessel
