// Softmax along the middle dim of an (outer, n, inner) view, with an optional
// causal mask, and its backward.
//
// Rows are numerically stable (the row max is subtracted before exp). With a
// causal mask (inner == 1 only) row r has query index
// q = (r / query_stride) % query_size and elements j > q get probability 0:
// they are never read, never exponentiated, and written as exact zeros. Results
// do not depend on the thread count.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// Which elements of a softmax row are masked: row r (of `outer`) attends to
// elements j <= (r / query_stride) % query_size. E.g. scores laid out
// (batch, heads, query, key) use query_size = seq, query_stride = 1.
struct CausalMask {
  int64_t query_size;
  int64_t query_stride;
};

// x (outer, n, inner) -> y (outer, n, inner) = softmax(scale * x) along n.
// mask may be nullptr; a mask requires inner == 1. y may alias x.
void softmax_forward(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, float scale,
                     const CausalMask* mask);
void softmax_forward_ref(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                         float scale, const CausalMask* mask);

// y (outer, n, inner) = softmax output, dy (outer, n, inner)
//   -> dx (outer, n, inner) = scale * y * (dy - sum_n(dy * y)).
// Masked entries have y == 0 and so get dx == 0; no mask argument is needed.
// dx may alias dy. Out uint16_t stores dx in bf16: round_to_bf16 of the f32
// dx, bit for bit, written once (base/bf16.h store_result).
template <typename Out>
void softmax_backward(const float* y, const float* dy, Out* dx, int64_t outer, int64_t n,
                      int64_t inner, float scale);
void softmax_backward_ref(const float* y, const float* dy, float* dx, int64_t outer, int64_t n,
                          int64_t inner, float scale);

}  // namespace tessel::kernels
