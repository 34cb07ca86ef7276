#include "tessel/tensor/aligned_buffer.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace tessel {
namespace {

std::atomic<int64_t> live_bytes{0};
std::atomic<int64_t> peak_bytes{0};

void note_allocated(size_t bytes) {
  const int64_t live = live_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_bytes.load(std::memory_order_relaxed);
  while (live > peak && !peak_bytes.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

void note_freed(size_t bytes) { live_bytes.fetch_sub(bytes, std::memory_order_relaxed); }

// A block of at least one huge page (the arena, parameters, gradients, the
// optimizer's moments) is mapped on its own, aligned to a huge page, and asks
// Linux for transparent huge pages over its whole huge pages, so sweeps over
// it miss the TLB far less (Debian's default THP mode, "madvise", grants them
// only when asked). Where the kernel refuses, small pages serve.
// Mapping it directly keeps tensor storage independent of malloc's policy
// (base/heap_reuse.h keeps freed heap memory, for MPI's temporaries): such
// blocks are allocated once and live long. Smaller blocks come from malloc.
constexpr size_t kHugePage = size_t{2} << 20;

uint8_t* allocate(size_t bytes) {
  if (bytes < kHugePage) {
    void* data = std::aligned_alloc(AlignedBuffer::kAlignment, round_up(bytes));
    if (!data) throw std::bad_alloc();
    return static_cast<uint8_t*>(data);
  }
  const size_t length = round_up(bytes, kHugePage);
  // Over-map by one huge page, then unmap what lies outside the aligned block.
  void* mapped =
      mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(mapped);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (start > base) munmap(mapped, start - base);
  if (const size_t tail = base + kHugePage - start; tail > 0)  // past start + length
    munmap(reinterpret_cast<void*>(start + length), tail);
  auto* data = reinterpret_cast<uint8_t*>(start);
  // The tail past the last whole huge page keeps small pages, so no more
  // memory is touched than requested.
  madvise(data, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return data;
}

void release(uint8_t* data, size_t bytes) {
  if (!data) return;
  if (bytes < kHugePage)
    std::free(data);
  else
    munmap(data, round_up(bytes, kHugePage));
}

}  // namespace

AllocationStats allocation_stats() {
  return {live_bytes.load(std::memory_order_relaxed), peak_bytes.load(std::memory_order_relaxed)};
}

void reset_allocation_peak() {
  peak_bytes.store(live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

AlignedBuffer::AlignedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  data_ = allocate(bytes);
  std::memset(data_, 0, round_up(bytes));
  note_allocated(bytes);
}

AlignedBuffer::~AlignedBuffer() {
  if (data_) note_freed(bytes_);
  release(data_, bytes_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) note_freed(bytes_);
    release(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace tessel
