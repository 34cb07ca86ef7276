// An f32 tensor in a backend's device memory: model state (parameters,
// AdamW moments) that kernels and the optimizer update in place. Offloaded
// moments (offload "optimizer") are the same kind of tensor in pinned host
// memory, which the host's update dereferences directly.
//
// Host code never dereferences device_f32(): it hands the address to the
// backend (bind_param, the optimizer's slots) and crosses the host boundary
// with read()/to_host() and write(), which copy through the backend. In the
// sanitizer build a host read of the memory outside the backend dies
// (CpuBackend poisons every kDevice block). Zero-initialised; move-only.
#pragma once

#include <vector>

#include "tessel/backend/backend.h"
#include "tessel/base/shape.h"

namespace tessel {

class DeviceTensor {
 public:
  DeviceTensor() = default;
  DeviceTensor(Backend& backend, Shape shape, MemorySpace space = MemorySpace::kDevice);

  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return memory_.size(); }
  bool empty() const { return nbytes() == 0; }
  // The device address, for the backend and communicators only.
  float* device_f32() const { return reinterpret_cast<float*>(memory_.data()); }
  MemorySpace space() const { return memory_.space(); }
  Backend& backend() const { return *backend_; }

  // Copies across the host boundary: every element (numel() floats at `host`).
  void read(float* host) const;
  std::vector<float> to_host() const;
  void write(const float* host);

 private:
  Backend* backend_ = nullptr;
  Shape shape_;
  DeviceMemory memory_;
};

}  // namespace tessel
