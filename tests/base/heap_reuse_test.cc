// keep_freed_memory_for_reuse: a large block freed and allocated again comes
// from the heap, not from a fresh mmap (whose pages fault in on every use).
#include "tessel/base/heap_reuse.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tessel {
namespace {

TEST(HeapReuse, LargeBlocksComeFromTheHeapAndStayThere) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "glibc's allocator only";
#else
  if (!keep_freed_memory_for_reuse()) GTEST_SKIP() << "this allocator ignores mallopt";
  EXPECT_TRUE(keep_freed_memory_for_reuse());  // idempotent
  constexpr size_t kBytes = 64u << 20;         // far above glibc's default 128 KiB mmap threshold
  const size_t mapped_before = mallinfo2().hblkhd;
  void* block = std::malloc(kBytes);
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "a 64 MiB block was mmapped";
  const size_t heap_in_use = mallinfo2().arena;
  std::free(block);
  EXPECT_EQ(mallinfo2().arena, heap_in_use) << "the freed block was trimmed back to the kernel";
#endif
}

}  // namespace
}  // namespace tessel
