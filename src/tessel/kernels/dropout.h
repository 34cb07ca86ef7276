// Inverted dropout with a counter-based (Philox) mask.
//
// Element i is kept iff PhiloxStream(seed, key_hash).uniform(index_offset + i)
// >= p, and kept elements are scaled by 1 / (1 - p); the mask is a pure function
// of (seed, key_hash, index), so nothing is stored and sharded callers agree by
// passing their global index_offset. The same call applied to the upstream
// gradient dy (same p, seed, key_hash, index_offset) is the exact backward:
// dx = mask * dy / (1 - p). p == 0 copies; p == 1 writes zeros.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// x (n) -> y (n). p in [0, 1], else tessel::Error. y may alias x.
void dropout(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
             int64_t index_offset);
void dropout_ref(const float* x, float* y, int64_t n, float p, uint64_t seed, uint64_t key_hash,
                 int64_t index_offset);

}  // namespace tessel::kernels
