// Element types. f32 is the training type; i32 holds token ids and labels.
// bf16 is reserved in the enum so serialised formats and signatures can name
// it, but no kernel accepts it yet.
#pragma once

#include <cstddef>

namespace tessel {

enum class DType { kF32, kI32, kBF16 };

inline size_t dtype_size(DType t) { return t == DType::kBF16 ? 2 : 4; }

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kI32:
      return "i32";
    case DType::kBF16:
      return "bf16";
  }
  return "?";
}

}  // namespace tessel
