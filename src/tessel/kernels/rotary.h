// Rotary position embeddings (RoPE) on the CPU, Meta's Llama convention.
//
// x is seen as (outer, positions, inner) around its position dim; inner ends
// with the rotated dim of `cols` elements (even), adjacent pairs (2i, 2i+1)
// of which are turned by the angle pos * f_i, f_i = theta^(-2i / cols) (with
// Llama 3.1's scaling when enabled, base/rotary_frequencies.h), pos = offset +
// the index along positions (offset: the first position of a sequence
// shard). The inverse turns by the opposite angle: it is the transpose, so
// the backward. Angles, cosines and sines are computed in double and stored
// as f32 in a table of positions x cols floats (the caller's scratch, see
// rotary_table_floats); each element depends only on its own pair and
// position, so results do not depend on the thread count.
#pragma once

#include <cstdint>

#include "tessel/base/rotary_frequencies.h"

namespace tessel::kernels {

struct RotaryView {
  int64_t outer = 1, positions = 1, inner = 1, cols = 2;
  int64_t offset = 0;  // global position of index 0
  float theta = 10000.0f;
  bool inverse = false;
  RotaryScaling scaling;
};

// Floats of scratch rotary() needs for `v`.
inline int64_t rotary_table_floats(const RotaryView& v) { return v.positions * v.cols; }

// x -> y (outer * positions * inner elements). y may alias x.
void rotary(const float* x, float* y, const RotaryView& v, float* table);
void rotary_ref(const float* x, float* y, const RotaryView& v);

}  // namespace tessel::kernels
