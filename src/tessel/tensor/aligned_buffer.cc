#include "tessel/tensor/aligned_buffer.h"

#include <sys/mman.h>

#include <atomic>
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
// optimizer's moments) is aligned to one and asks Linux for transparent huge
// pages over its whole huge pages, so sweeps over it miss the TLB far less
// (Debian's default THP mode, "madvise", grants them only when asked). The
// tail past the last whole huge page keeps small pages, so no more memory is
// touched than requested. Where the kernel refuses, small pages serve as
// before.
constexpr size_t kHugePage = size_t{2} << 20;

uint8_t* allocate(size_t bytes) {
  const size_t align = bytes >= kHugePage ? kHugePage : AlignedBuffer::kAlignment;
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(align, round_up(bytes, align)));
  if (!data) throw std::bad_alloc();
  if (align == kHugePage) madvise(data, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return data;
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
  std::free(data_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    if (data_) note_freed(bytes_);
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace tessel
