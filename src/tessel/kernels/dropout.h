// Inverted dropout with a counter-based (Philox) mask.
//
// Element i is kept iff
//   PhiloxStream(seed, key_hash ^ mix(step >> 32)).uniform(index_offset + i * index_stride,
//                                                          lane = step mod 2^32) >= p,
// and kept elements are scaled by 1 / (1 - p). The mask is a pure function of
// (seed, key_hash, step, index): nothing is stored, sharded callers agree by
// passing global indices, and a new step draws a new mask. The same call
// applied to the upstream gradient dy (same p, seed, key_hash, step, indices)
// is the exact backward: dx = mask * dy / (1 - p). p == 0 copies; p == 1
// writes zeros.
#pragma once

#include <cstdint>

#include "tessel/base/philox.h"

namespace tessel::kernels {

// The mask dropout() draws (fused attention draws the mask of its
// probabilities with it: kernels/attention.h).
class DropoutMask {
 public:
  DropoutMask(float p, uint64_t seed, uint64_t key_hash, uint64_t step);
  bool keep(int64_t index) const {
    return stream_.uniform(static_cast<uint64_t>(index), lane_) >= p_;
  }
  // keep[i] = keep(first + i * stride) for i in [0, n), n <= kMaxKeeps, on
  // PhiloxStream::uniforms (many counters at a time).
  static constexpr int64_t kMaxKeeps = 256;
  void keeps(int64_t first, int64_t stride, int64_t n, bool* keep) const;
  float keep_scale() const { return keep_scale_of(p_); }
  static float keep_scale_of(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }  // 1/(1-p)

 private:
  PhiloxStream stream_;
  uint32_t lane_;
  float p_;
};

// x (n) -> y (n). p in [0, 1], else tessel::Error. y may alias x.
void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
             uint64_t step, int64_t index_offset, int64_t index_stride = 1);
void dropout_ref(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
                 uint64_t step, int64_t index_offset, int64_t index_stride = 1);

}  // namespace tessel::kernels
