#include "tessel/train/threads.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace tessel {

int default_threads(int cores, int local_ranks) {
  return std::max(1, cores / std::max(1, local_ranks));
}

int local_rank_count() {
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local == nullptr) return 1;
  char* end = nullptr;
  const long n = std::strtol(local, &end, 10);
  return end != local && *end == '\0' && n >= 1 && n <= 1 << 20 ? static_cast<int>(n) : 1;
}

int resolve_threads(int configured) {
  if (configured > 0) return configured;
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr && *env != '\0')
    return omp_get_max_threads();
  const int host = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  // omp_get_num_procs: the cores this process may run on (mpirun may bind it).
  return std::min(omp_get_num_procs(), default_threads(host, local_rank_count()));
}

int apply_threads(int configured) {
  omp_set_num_threads(resolve_threads(configured));
  return omp_get_max_threads();
}

}  // namespace tessel
