#include "tessel/base/heap_reuse.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tessel {

bool keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  // Blocks up to 1 GiB come from the heap rather than their own mmap, and
  // the heap's free top is never trimmed back to the kernel.
  constexpr int kMmapThreshold = 1 << 30;
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1;
  const bool trim_set = mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return mmap_set && trim_set;
#else
  return false;
#endif
}

}  // namespace tessel
