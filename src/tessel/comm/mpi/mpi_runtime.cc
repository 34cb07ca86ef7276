// MpiRuntime: MPI's start and end, the world and split communicators.
// The watchdog lives in mpi_watchdog.cc, the collectives in mpi_communicator.cc.
#include "tessel/comm/mpi/mpi_runtime.h"

#include <cstdio>
#include <cstdlib>

#include "tessel/base/error.h"
#include "tessel/base/heap_reuse.h"
#include "tessel/comm/mpi/mpi_calls.h"
#include "tessel/comm/mpi/open_mpi_defaults.h"

namespace tessel {

using mpi_detail::check_mpi;
using mpi_detail::kDefaultTimeoutS;
using mpi_detail::mpi_error_string;
using mpi_detail::mpi_finalized;
using mpi_detail::WatchScope;

MpiRuntime& MpiRuntime::instance() {
  static MpiRuntime runtime;
  return runtime;
}

bool MpiRuntime::launched_under_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

void MpiRuntime::init(int* argc, char*** argv) {
  if (initialized_) return;
  keep_freed_memory_for_reuse();  // MPI's per-call temporaries (base/heap_reuse.h)
  int already = 0;
  MPI_Initialized(&already);
  if (already) {
    if (mpi_finalized()) TS_THROW("MpiRuntime::init: MPI has already been finalized");
  } else {
    set_open_mpi_defaults();  // before MPI reads its parameters (open_mpi_defaults.h)
    int provided = 0;
    int code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (code != MPI_SUCCESS) TS_THROW("MPI_Init_thread failed: ", mpi_error_string(code));
    we_started_ = true;
  }
  std::atexit(&MpiRuntime::finalize_at_exit);
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
            "world", "init", 0);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank", "world", "init", 0);
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size", "world", "init", 0);
  initialized_ = true;

  timeout_s_ = kDefaultTimeoutS;
  if (const char* text = std::getenv("TESSEL_COMM_TIMEOUT_S"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    double seconds = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(seconds >= 0))
      TS_THROW("TESSEL_COMM_TIMEOUT_S='", text, "' is not a number of seconds >= 0");
    timeout_s_ = seconds;
  }
  if (timeout_s_ > 0) start_watchdog();
}

void MpiRuntime::finalize_at_exit() {
  MpiRuntime& runtime = instance();
  runtime.stop_watchdog();
  if (runtime.we_started_ && !mpi_finalized()) MPI_Finalize();
  runtime.initialized_ = false;
}

void MpiRuntime::require_initialized(const char* what) const {
  if (!initialized_) TS_THROW("MpiRuntime::", what, " called before MpiRuntime::init()");
}

int MpiRuntime::world_rank() const {
  require_initialized("world_rank");
  return world_rank_;
}

int MpiRuntime::world_size() const {
  require_initialized("world_size");
  return world_size_;
}

std::unique_ptr<Communicator> MpiRuntime::world(const std::string& name) {
  require_initialized("world");
  MPI_Comm comm = MPI_COMM_NULL;
  {
    WatchScope watch("MPI_Comm_dup", name, "world", 0);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup", name, "world", 0);
  }
  return std::make_unique<MpiCommunicator>(comm, name);
}

std::unique_ptr<Communicator> MpiRuntime::split(const std::string& name, int color, int key) {
  require_initialized("split");
  if (color < 0) TS_THROW("MpiRuntime::split('", name, "'): color ", color, " must be >= 0");
  MPI_Comm comm = MPI_COMM_NULL;
  {
    WatchScope watch("MPI_Comm_split", name, "split", 0);
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm), "MPI_Comm_split", name, "split",
              0);
  }
  return std::make_unique<MpiCommunicator>(comm, name);
}

void MpiRuntime::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized_ && !mpi_finalized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void MpiRuntime::barrier() {
  require_initialized("barrier");
  WatchScope watch("barrier", "world", "barrier", 0);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "barrier", "world", "barrier", 0);
}

}  // namespace tessel
