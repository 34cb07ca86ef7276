// A host tensor: a named-dim shape, a dtype and aligned storage it owns.
//
// Used at API boundaries (parameters, checkpoints, test inputs). Inside a
// compiled program values are plain offsets into one arena instead.
// Move-only (the storage is heavy).
#pragma once

#include "tessel/base/dtype.h"
#include "tessel/base/shape.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {

class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, DType dtype)
      : shape_(std::move(shape)), dtype_(dtype), storage_(shape_.numel() * dtype_size(dtype)) {}

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return storage_.size(); }

  void* raw() { return storage_.data(); }

 private:
  Shape shape_;
  DType dtype_ = DType::kF32;
  AlignedBuffer storage_;
};

}  // namespace tessel
