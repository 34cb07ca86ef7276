#include "tessel/comm/mpi/open_mpi_defaults.h"

#include <cstdlib>
#include <string>

namespace tessel {

void set_open_mpi_defaults() {
  struct Default {
    const char* name;
    const char* value;
  };
  static constexpr Default kDefaults[] = {{"coll_libnbc_iallreduce_algorithm", "3"}};
  for (const Default& d : kDefaults) {
    const std::string variable = std::string("OMPI_MCA_") + d.name;
    setenv(variable.c_str(), d.value, /*overwrite=*/0);  // a value already set is the user's
  }
}

}  // namespace tessel
