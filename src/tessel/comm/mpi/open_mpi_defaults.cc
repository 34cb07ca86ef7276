#include "tessel/comm/mpi/open_mpi_defaults.h"

#include <cstdlib>

namespace tessel {

void set_open_mpi_defaults() {
  // overwrite = 0: a value already in the environment is the user's.
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", /*overwrite=*/0);
}

}  // namespace tessel
