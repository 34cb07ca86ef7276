#include "tessel/backend/backend.h"

#include <utility>

#include "tessel/backend/cpu/cpu_backend.h"
#include "tessel/base/error.h"

#if TESSEL_HAS_CUDA
#include "tessel/backend/cuda/cuda_backend.h"
#endif

namespace tessel {

const char* memory_space_name(MemorySpace space) {
  switch (space) {
    case MemorySpace::kDevice:
      return "device";
    case MemorySpace::kPinnedHost:
      return "pinned host";
    case MemorySpace::kHost:
      return "host";
  }
  return "?";
}

DeviceMemory::DeviceMemory(Backend* owner, MemorySpace space, uint8_t* data, size_t bytes)
    : owner_(owner), space_(space), data_(data), bytes_(bytes) {
  if (owner_ && data_) owner_->count(space_, static_cast<int64_t>(bytes_));
}

DeviceMemory& DeviceMemory::operator=(DeviceMemory&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    space_ = other.space_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceMemory::reset() {
  if (owner_ && data_) {
    owner_->count(space_, -static_cast<int64_t>(bytes_));
    owner_->release(space_, data_, bytes_);
  }
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

void Backend::count(MemorySpace space, int64_t bytes) {
  const int i = static_cast<int>(space);
  const int64_t live = live_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = peak_[i].load(std::memory_order_relaxed);
  while (live > peak && !peak_[i].compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

SpaceStats Backend::space_stats(MemorySpace space) const {
  const int i = static_cast<int>(space);
  return {live_[i].load(std::memory_order_relaxed), peak_[i].load(std::memory_order_relaxed)};
}

void Backend::fill_zero(float*, int64_t) {
  TS_THROW("device ", name(), ": the backend operation fill_zero is not written yet");
}

void Backend::scale(float*, int64_t, float) {
  TS_THROW("device ", name(), ": the backend operation scale is not written yet");
}

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

int64_t device_runtime_bytes(const std::string& device) {
  return device == "cuda" ? static_cast<int64_t>(kCudaGemmWorkspaceBytes) : 0;
}

bool built_with_cuda() {
#if TESSEL_HAS_CUDA
  return true;
#else
  return false;
#endif
}

Backend& backend_for(const std::string& device) {
  if (device == "cpu") return cpu_backend();
#if TESSEL_HAS_CUDA
  if (device == "cuda") return cuda_backend();  // probes the GPU: "no usable GPU (...)"
#endif
  if (device == "cuda")
    TS_THROW(
        "device cuda: this build of Tessel has no CUDA backend yet (docs/gpu.md says what "
        "exists); use device cpu");
  TS_THROW("device '", device, "' is not a device Tessel knows (cpu, cuda)");
}

}  // namespace tessel
