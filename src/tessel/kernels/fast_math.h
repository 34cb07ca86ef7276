// Vectorisable float approximations of exp, log and tanh for the CPU kernels.
//
// Every function here is inline and branch-free (no libm calls), so GCC/Clang
// vectorise loops that call them under `#pragma omp simd`. Conditional results
// go through blend() (a bitwise select): with the default -ftrapping-math GCC
// will not if-convert `c ? a : b` when it has sunk an FP op into one arm, and
// the loop then stays scalar.
// Accuracy (checked against double-precision libm in kernels_test.cc):
//   fast_exp   relative error < 2e-7 for x in [-87.3, 88.3]; flushes to 0 below
//              about -87.7 (no denormals) and returns +inf above about 88.4
//              (the top 1.4x below FLT_MAX overflows early).
//   fast_log   relative error < 4e-7 for finite x > 0 (denormals included);
//              log(0) = -inf, log(x < 0) = NaN, log(inf) = inf.
//   fast_tanh  relative error < 1e-6 everywhere; odd; saturates to +-1.
//   fast_sqrt  within 1 ulp of sqrt for x >= 0 (denormals included); sqrt(inf) =
//              inf; negative x gives NaN. (std::sqrt only vectorises under
//              -fno-math-errno; this does under any flags.)
// NaN inputs give NaN. Results are deterministic for a given binary.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace tessel::kernels {

// a * b + c, fused when the target has FMA (never a libm call).
inline float fmadd(float a, float b, float c) {
#ifdef __FMA__
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// c ? a : b, computed with integer bit operations so both arms are always
// evaluated and the compiler can vectorise it.
inline float blend(bool c, float a, float b) {
  const int32_t mask = -static_cast<int32_t>(c);
  return std::bit_cast<float>((std::bit_cast<int32_t>(a) & mask) |
                              (std::bit_cast<int32_t>(b) & ~mask));
}

inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // n * kLn2Hi is exact for |n| <= 256
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  // Clamping (min/max patterns keep NaN as NaN) bounds n to [-127, 128]; n = -127
  // gives a zero scale (underflow to 0) and n = 128 an infinite one (overflow).
  float xc = x < -88.0f ? -88.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  // x = n ln2 + r with n integer and |r| <= ln2 / 2.
  const float t = fmadd(xc, kLog2e, kRound);
  const float n = t - kRound;
  float r = fmadd(n, -kLn2Hi, xc);
  r = fmadd(n, -kLn2Lo, r);
  // exp(r) by its Taylor series to degree 7 (truncation < 6e-9 on |r| <= 0.347).
  float p = 1.0f / 5040.0f;
  p = fmadd(p, r, 1.0f / 720.0f);
  p = fmadd(p, r, 1.0f / 120.0f);
  p = fmadd(p, r, 1.0f / 24.0f);
  p = fmadd(p, r, 1.0f / 6.0f);
  p = fmadd(p, r, 0.5f);
  p = fmadd(p, r, 1.0f);
  p = fmadd(p, r, 1.0f);
  // 2^n built from the rounding bits of t (its low mantissa bits hold n).
  const int32_t n_int = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRound);
  const float scale = std::bit_cast<float>((n_int + 127) << 23);
  return p * scale;
}

inline float fast_log(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  constexpr int32_t kSqrtHalfBits = 0x3F3504F3;     // bits of sqrt(0.5)
  const bool tiny = x < kMinNormal;                 // denormal, zero or negative
  const float xs = blend(tiny, x * 8388608.0f, x);  // 2^23 lifts denormals to normals
  // x = 2^e * m with m in [sqrt(0.5), sqrt(2)).
  const int32_t bits = std::bit_cast<int32_t>(xs);
  const int32_t e = (bits - kSqrtHalfBits) >> 23;
  const float m = std::bit_cast<float>(bits - (e << 23));
  const float ef = static_cast<float>(e) - blend(tiny, 23.0f, 0.0f);
  // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.172: odd series to s^9.
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  float p = 2.0f / 9.0f;
  p = fmadd(p, s2, 2.0f / 7.0f);
  p = fmadd(p, s2, 2.0f / 5.0f);
  p = fmadd(p, s2, 2.0f / 3.0f);
  p = fmadd(p, s2, 2.0f);
  float result = fmadd(ef, kLn2Hi, fmadd(ef, kLn2Lo, p * s));
  result = blend(x == std::numeric_limits<float>::infinity(), x, result);
  result = blend(x == 0.0f, -std::numeric_limits<float>::infinity(), result);
  result = blend(x < 0.0f, std::numeric_limits<float>::quiet_NaN(), result);
  return blend(x != x, x, result);
}

inline float fast_tanh(float x) {
  const float a = std::fabs(x);
  // Large |x|: (1 - e) / (1 + e) with e = exp(-2|x|) in (0, 0.37].
  const float e = fast_exp(-2.0f * a);
  const float big = (1.0f - e) / (1.0f + e);
  // Small |x| (< 0.5), where 1 - e cancels: Taylor series to x^13 (error < 1e-7).
  const float a2 = a * a;
  float p = 21844.0f / 6081075.0f;
  p = fmadd(p, a2, -1382.0f / 155925.0f);
  p = fmadd(p, a2, 62.0f / 2835.0f);
  p = fmadd(p, a2, -17.0f / 315.0f);
  p = fmadd(p, a2, 2.0f / 15.0f);
  p = fmadd(p, a2, -1.0f / 3.0f);
  const float small = fmadd(a * a2, p, a);
  const float t = blend(a < 0.5f, small, big);
  return std::copysign(t, x);
}

inline float fast_sqrt(float x) {
  // Inverse square root from the classic bit-level guess (relative error < 3.5e-3)
  // and two Newton steps (< 1e-9 before rounding), then one Newton step on
  // s = x / sqrt(x) itself, which makes the result faithfully rounded.
  const bool tiny = x < 1.17549435e-38f;             // denormal (or zero/negative)
  const float xs = blend(tiny, x * 16777216.0f, x);  // 2^24 lifts denormals; sqrt scales 2^12
  float y = std::bit_cast<float>(0x5F375A86 - (std::bit_cast<int32_t>(xs) >> 1));
  const float half = 0.5f * xs;
  y = y * fmadd(-half * y, y, 1.5f);
  y = y * fmadd(-half * y, y, 1.5f);
  float s = xs * y;
  s = fmadd(0.5f * y, fmadd(-s, s, xs), s);
  s = blend(tiny, s * (1.0f / 4096.0f), s);
  s = blend(x == std::numeric_limits<float>::infinity(), x, s);
  s = blend(x == 0.0f, x, s);  // keeps the sign of -0
  return blend(x < 0.0f, std::numeric_limits<float>::quiet_NaN(), s);
}

}  // namespace tessel::kernels
