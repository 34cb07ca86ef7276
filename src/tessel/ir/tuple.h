// Tuples: how one node computes several values.
//
// A multi-output op (fused attention: its output and log-sum-exp; its
// gradient: dq, dk and dv) is one node whose value is a tuple: its
// elements, each with its own named-dim shape and dtype, packed back to back
// in one buffer at kTupleAlign-byte offsets. Every element is read through a
// `tuple_get` node, a view at the element's offset (like split_dim, it moves
// no data), so every other node, pass and kernel keeps seeing one value per
// node with one shape. The tuple itself is shaped (tuple=W), W 4-byte words
// covering the packed elements, so byte counts (memory plan, reports) hold.
// Invariants: a tuple is read only by tuple_get; it is never boxed (the
// lowering places its elements through the op's signature, one placement
// for all elements) and never stored in bf16.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/base/dtype.h"
#include "tessel/base/shape.h"

namespace tessel {

inline const std::string kTupleDim = "tuple";  // the packed tuple's only dim
inline constexpr int64_t kTupleAlign = 64;     // bytes: each element starts at a multiple

struct TupleElement {
  Shape shape;
  DType dtype = DType::kF32;
  int64_t offset = 0;  // bytes from the tuple's start (set by pack_tuple)
};

// Sets each element's offset; returns the packed tuple's shape, (tuple=W).
inline Shape pack_tuple(std::vector<TupleElement>& elements) {
  int64_t bytes = 0;
  for (TupleElement& e : elements) {
    e.offset = bytes;
    const int64_t size = e.shape.numel() * static_cast<int64_t>(dtype_size(e.dtype));
    bytes += (size + kTupleAlign - 1) / kTupleAlign * kTupleAlign;
  }
  return Shape{{kTupleDim, bytes / 4}};
}

}  // namespace tessel
