#include "tessel/backend/device_tensor.h"

namespace tessel {

DeviceTensor::DeviceTensor(Backend& backend, Shape shape, MemorySpace space)
    : backend_(&backend),
      shape_(std::move(shape)),
      memory_(backend.allocate(space, shape_.numel() * sizeof(float))) {}

void DeviceTensor::read(float* host) const {
  if (nbytes()) backend_->copy_to_host(host, memory_.data(), nbytes());
}

std::vector<float> DeviceTensor::to_host() const {
  std::vector<float> out(numel());
  read(out.data());
  return out;
}

void DeviceTensor::write(const float* host) {
  if (nbytes()) backend_->copy_from_host(memory_.data(), host, nbytes());
}

}  // namespace tessel
