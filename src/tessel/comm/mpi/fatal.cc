// report_fatal_error: print, then MPI_Abort the whole job if MPI is running.
#include "tessel/comm/fatal.h"

#include <cstdio>
#include <cstdlib>

#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel {

int report_fatal_error(const std::string& message, int code) {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank == nullptr) rank = std::getenv("PMIX_RANK");
  std::fprintf(stderr, "tessel: %s%s%serror: %s\n", rank ? "[rank " : "", rank ? rank : "",
               rank ? "] " : "", message.c_str());
  std::fflush(stderr);
  MpiRuntime& mpi = MpiRuntime::instance();
  if (mpi.initialized() && mpi.world_size() > 1) {
    std::fprintf(stderr, "tessel: [rank %d] aborting every rank of the job (MPI_Abort, code %d)\n",
                 mpi.world_rank(), code);
    mpi.abort(code);
  }
  return code;
}

}  // namespace tessel
