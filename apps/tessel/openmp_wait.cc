#include "openmp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace tessel::cli {

void exec_with_openmp_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (::setenv("GOMP_SPINCOUNT", kGompSpinCount, 0) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only on failure
}

}  // namespace tessel::cli
