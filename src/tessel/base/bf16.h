// bf16 rounding and widening on plain CPU code, for any instruction set.
//
// bf16 is the top half of an f32: 8 exponent bits, 7 stored mantissa bits.
// Rounding is to nearest, ties to even (what oneDNN's reorders do); NaN stays
// a (quiet) NaN of the same sign, and values that round past the largest
// finite bf16 become infinities. Widening a bf16 to f32 is exact. So
// round_bf16_in_f32(x) == widen_bf16(round_to_bf16(x)) bit for bit, and a product of two
// such values is exact in f32 (8 + 8 significant bits < 24).
// Results do not depend on the thread count (elementwise).
#pragma once

#include <cstdint>
#include <cstring>

namespace tessel {

inline uint16_t f32_to_bf16_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float bf16_bits_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// A kernel's store of one f32 result into its output: as is into f32, rounded
// to nearest even into bf16. Kernels templated on their output type call it,
// so a bf16-stored value is written once, in bf16, with the bits
// round_to_bf16 would give the f32 result.
inline void store_result(float* out, float v) { *out = v; }
inline void store_result(uint16_t* out, float v) { *out = f32_to_bf16_bits(v); }

// in (n) f32 -> out (n) bf16, rounded to nearest even.
void round_to_bf16(const float* in, uint16_t* out, int64_t n);
// in (n) f32 -> out (n) f32 holding the bf16-rounded values (in and out may alias).
void round_bf16_in_f32(const float* in, float* out, int64_t n);
// in (n) bf16 -> out (n) f32, exact.
void widen_bf16(const uint16_t* in, float* out, int64_t n);

}  // namespace tessel
