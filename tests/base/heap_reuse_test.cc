// keep_freed_memory_for_reuse: a large block freed and allocated again comes
// from the heap, not from a fresh mmap (whose pages fault in on every use);
// tensor storage (AlignedBuffer's huge-page blocks) stays out of that heap.
#include "tessel/base/heap_reuse.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "tessel/tensor/aligned_buffer.h"

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

TEST(HeapReuse, HugePageTensorStorageIsMappedOutsideTheHeap) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "glibc's allocator only";
#else
  if (!keep_freed_memory_for_reuse()) GTEST_SKIP() << "this allocator ignores mallopt";
  constexpr size_t kHugePage = size_t{2} << 20;
  constexpr size_t kBytes = 5 * kHugePage + 3;  // a partial huge page at the end
  const struct mallinfo2 before = mallinfo2();
  AlignedBuffer buffer(kBytes);
  const struct mallinfo2 after = mallinfo2();
  // uordblks: heap bytes in use (a free chunk kept by an earlier test may
  // serve the block without growing the heap, so its size would not tell).
  EXPECT_LT(after.uordblks, before.uordblks + kHugePage)
      << "a huge-page tensor block came from the heap";
  EXPECT_EQ(after.hblkhd, before.hblkhd) << "a huge-page tensor block came from malloc's mmap";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buffer.data()) % kHugePage, 0u);
  EXPECT_EQ(buffer.data()[0], 0);
  EXPECT_EQ(buffer.data()[kBytes - 1], 0);
  std::memset(buffer.data(), 7, kBytes);  // every requested byte is writable
  AlignedBuffer moved = std::move(buffer);
  EXPECT_EQ(moved.data()[kBytes - 1], 7);
  moved = AlignedBuffer(kHugePage);  // releases the first mapping
  EXPECT_EQ(moved.data()[kHugePage - 1], 0);
#endif
}

}  // namespace
}  // namespace tessel
