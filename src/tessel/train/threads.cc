#include "tessel/train/threads.h"

#include <omp.h>

namespace tessel {

// Before the fix (issue 34): every core, whatever the ranks.
int default_threads(int cores, int local_ranks) {
  (void)local_ranks;
  return cores;
}

int local_rank_count() { return 1; }

int apply_threads(int configured) {
  if (configured > 0) omp_set_num_threads(configured);
  return omp_get_max_threads();
}

}  // namespace tessel
