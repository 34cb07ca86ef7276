// Ring attention's load balancing (sharding/context_parallel.h): a local
// chunk as two halves of its sequence dim, moved between the contiguous and
// the balanced order. Both have the local shape and strides (slot s:
// positions [s L/2, (s+1) L/2)): the kernel reads a slot as a view.
#pragma once

#include <string>

#include "tessel/base/shape.h"
#include "tessel/comm/communicator.h"
#include "tessel/kernels/attention.h"
#include "tessel/sharding/context_parallel.h"

namespace tessel {

// A row-major tensor as (outer, len, inner) around its sequence dim.
struct Halves {
  int64_t outer = 1, len = 0, inner = 1;
  int64_t half() const { return len / 2; }
  int64_t numel() const { return outer * len * inner; }
  int64_t offset(int slot) const { return slot * half() * inner; }  // of slot's first element
  int64_t stage() const { return numel() + numel() / 2; }  // exchange(): 2 halves out, 1 in
};
Halves halves_of(const Shape& shape, const std::string& seq_dim);

// Exchanges over the ring's axis (n >= 2 ranks); `stage` holds the largest
// Halves::stage(); each uses the next 2n tags.
struct HalfExchange {
  Communicator& comm;
  float* stage;
  int tag;
  const std::string& op;
  // This rank's halves of `src` into `dst` in order `to`; dst may be src's
  // f32 data (every half that leaves is packed first; at most one stays).
  void operator()(kernels::AttentionInput src, float* dst, const Halves& g, HalfOrder to);
};

}  // namespace tessel
