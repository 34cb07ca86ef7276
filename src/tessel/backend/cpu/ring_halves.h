// The load-balanced order of ring attention (sharding/context_parallel.h):
// an operand's local chunk along its sequence dim seen as two halves, and
// the exchange that moves a rank's halves from the layout's contiguous order
// (halves 2r, 2r+1 of the sequence) to the balanced one (halves r and
// 2n-1-r) before the ring, and back after it.
// Invariants: the balanced tensor has the local tensor's shape and strides
// (slot s is positions [s L/2, (s+1) L/2) of the local dim), so the kernel
// reads a slot as a view at offset(s) with L/2 positions; a half that stays
// on its rank is copied, never sent.
#pragma once

#include <cstdint>
#include <string>

#include "tessel/base/shape.h"
#include "tessel/comm/communicator.h"
#include "tessel/kernels/attention.h"

namespace tessel {

// A row-major tensor as (outer, len, inner) around its sequence dim.
struct Halves {
  int64_t outer = 1, len = 0, inner = 1;
  int64_t half() const { return len / 2; }
  int64_t numel() const { return outer * len * inner; }
  int64_t offset(int slot) const { return slot * half() * inner; }  // of slot's first element
};
Halves halves_of(const Shape& shape, const std::string& seq_dim);

// Two halves packed to send, one received.
inline int64_t exchange_stage_floats(const Halves& g) { return g.numel() + g.numel() / 2; }

enum class HalfOrder { kBalanced, kContiguous };

// Moves this rank's halves of `src` (in the other order) into `dst` in order
// `to`, over the ring's axis (`comm`, one rank per coordinate, n >= 2); dst
// may be src's f32 data (in place). `stage` holds exchange_stage_floats(g)
// floats; tags tag .. tag + 2n - 1 are used.
void exchange_halves(Communicator& comm, kernels::AttentionInput src, float* dst, const Halves& g,
                     HalfOrder to, float* stage, int tag, const std::string& op);

}  // namespace tessel
