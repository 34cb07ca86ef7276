#include "tessel/tensor/aligned_buffer.h"

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

}  // namespace

AllocationStats allocation_stats() {
  return {live_bytes.load(std::memory_order_relaxed), peak_bytes.load(std::memory_order_relaxed)};
}

void reset_allocation_peak() {
  peak_bytes.store(live_bytes.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

AlignedBuffer::AlignedBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, round_up(bytes)));
  if (!data_) throw std::bad_alloc();
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
