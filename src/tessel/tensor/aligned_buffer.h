// An owned, 64-byte-aligned, zero-initialised block of bytes.
//
// Used for the execution arena and for parameter and optimizer storage. Large
// blocks are allocated once and reused for the whole run: a training step
// never allocates. A block of 2 MiB or more is mapped on its own (never from
// malloc's heap, whatever base/heap_reuse.h sets), aligned to 2 MiB, and asks
// for transparent huge pages over its whole huge pages (aligned_buffer.cc).
// Move-only.
//
// Every buffer is counted process-wide (allocation_stats): the bytes live now
// and the most ever live at once, in requested bytes (the alignment padding,
// under 64 bytes a buffer, is not counted). The counters are relaxed atomics:
// two additions per allocation, safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessel {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  size_t size() const { return bytes_; }
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data_);
  }

 private:
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

struct AllocationStats {
  int64_t live_bytes = 0;  // in AlignedBuffers that exist now
  int64_t peak_bytes = 0;  // the high-water mark of live_bytes
};
AllocationStats allocation_stats();
// Restarts the high-water mark at the bytes live now (tests).
void reset_allocation_peak();

inline size_t round_up(size_t bytes, size_t alignment = AlignedBuffer::kAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace tessel
