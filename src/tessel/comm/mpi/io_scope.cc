#include "tessel/comm/io_scope.h"

#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel {

IoScope::IoScope(const std::string& what) {
  MpiRuntime& mpi = MpiRuntime::instance();
  if (!mpi.initialized() || !mpi.watchdog_enabled()) return;
  mpi.begin_io(what);
  active_ = true;
}

IoScope::~IoScope() {
  if (active_) MpiRuntime::instance().end_io();
}

}  // namespace tessel
