// Device twins of the CPU kernels' scalar math, for cuda_kernels.cu only.
//
// fast_exp, fast_log, fast_tanh and the GELU forms are the formulas of
// kernels/fast_math.h and kernels/elementwise.cc step for step, with every
// fmadd a fused multiply-add (__fmaf_rn): the CPU build is -march=native,
// which has FMA on every x86-64 machine Tessel targets, so the bits agree
// where the CPU kernel uses these functions. Philox4x32-10 and the stream
// keying are base/philox.cc's; f32 -> bf16 rounding is base/bf16.h's
// (nearest even, NaN quieted). Nothing here has run on a GPU yet.
#pragma once

#include <cstdint>

namespace tessel::cuda {

__device__ __forceinline__ float fmadd(float a, float b, float c) { return __fmaf_rn(a, b, c); }

__device__ __forceinline__ float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  constexpr float kRound = 12582912.0f;
  float xc = x < -88.0f ? -88.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  const float t = fmadd(xc, kLog2e, kRound);
  const float n = __fsub_rn(t, kRound);
  float r = fmadd(n, -kLn2Hi, xc);
  r = fmadd(n, -kLn2Lo, r);
  float p = 1.0f / 5040.0f;
  p = fmadd(p, r, 1.0f / 720.0f);
  p = fmadd(p, r, 1.0f / 120.0f);
  p = fmadd(p, r, 1.0f / 24.0f);
  p = fmadd(p, r, 1.0f / 6.0f);
  p = fmadd(p, r, 0.5f);
  p = fmadd(p, r, 1.0f);
  p = fmadd(p, r, 1.0f);
  const int32_t n_int = __float_as_int(t) - __float_as_int(kRound);
  const float scale = __int_as_float((n_int + 127) << 23);
  return __fmul_rn(p, scale);
}

__device__ __forceinline__ float fast_log(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  constexpr float kLn2Hi = 0.693145751953125f;
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  constexpr int32_t kSqrtHalfBits = 0x3F3504F3;
  const bool tiny = x < kMinNormal;
  const float xs = tiny ? __fmul_rn(x, 8388608.0f) : x;
  const int32_t bits = __float_as_int(xs);
  const int32_t e = (bits - kSqrtHalfBits) >> 23;
  const float m = __int_as_float(bits - (e << 23));
  const float ef = static_cast<float>(e) - (tiny ? 23.0f : 0.0f);
  const float s = __fdiv_rn(__fsub_rn(m, 1.0f), __fadd_rn(m, 1.0f));
  const float s2 = __fmul_rn(s, s);
  float p = 2.0f / 9.0f;
  p = fmadd(p, s2, 2.0f / 7.0f);
  p = fmadd(p, s2, 2.0f / 5.0f);
  p = fmadd(p, s2, 2.0f / 3.0f);
  p = fmadd(p, s2, 2.0f);
  float result = fmadd(ef, kLn2Hi, fmadd(ef, kLn2Lo, __fmul_rn(p, s)));
  if (x == __int_as_float(0x7f800000)) result = x;
  if (x == 0.0f) result = __int_as_float(0xff800000);
  if (x < 0.0f) result = __int_as_float(0x7fc00000);
  return x != x ? x : result;
}

__device__ __forceinline__ float fast_tanh(float x) {
  const float a = fabsf(x);
  const float e = fast_exp(__fmul_rn(-2.0f, a));
  const float big = __fdiv_rn(__fsub_rn(1.0f, e), __fadd_rn(1.0f, e));
  const float a2 = __fmul_rn(a, a);
  float p = 21844.0f / 6081075.0f;
  p = fmadd(p, a2, -1382.0f / 155925.0f);
  p = fmadd(p, a2, 62.0f / 2835.0f);
  p = fmadd(p, a2, -17.0f / 315.0f);
  p = fmadd(p, a2, 2.0f / 15.0f);
  p = fmadd(p, a2, -1.0f / 3.0f);
  const float small = fmadd(__fmul_rn(a, a2), p, a);
  return copysignf(a < 0.5f ? small : big, x);
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluK = 0.044715f;

// GELU's tanh form as x * sigmoid(2u), u = c (x + k x^3) (kernels/elementwise.cc).
__device__ __forceinline__ float gelu_one(float x) {
  const float u = __fmul_rn(kGeluC, fmadd(__fmul_rn(kGeluK, x), __fmul_rn(x, x), x));
  float z = __fmul_rn(-2.0f, u);
  z = z > 87.0f ? 87.0f : z;
  return __fdiv_rn(x, __fadd_rn(1.0f, fast_exp(z)));
}

__device__ __forceinline__ float gelu_grad_one(float x) {
  const float u = __fmul_rn(kGeluC, fmadd(__fmul_rn(kGeluK, x), __fmul_rn(x, x), x));
  float z = __fmul_rn(-2.0f, u);
  z = z > 87.0f ? 87.0f : z;
  const float e = fast_exp(z);
  const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, e));
  const float du = __fmul_rn(kGeluC, fmadd(__fmul_rn(3.0f * kGeluK, x), x, 1.0f));
  return fmadd(__fmul_rn(__fmul_rn(__fmul_rn(2.0f, x), s), __fmul_rn(e, s)), du, s);
}

// base/bf16.h's f32_to_bf16_bits.
__device__ __forceinline__ uint16_t f32_to_bf16_bits(float x) {
  uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// A kernel's store of one f32 result: as is, or rounded into bf16.
__device__ __forceinline__ void store_result(float* out, float v) { *out = v; }
__device__ __forceinline__ void store_result(uint16_t* out, float v) { *out = f32_to_bf16_bits(v); }

// base/philox.cc's philox4x32, word 0 only (what uniform() reads).
__device__ __forceinline__ uint32_t philox_word0(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                                 uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c0;
}

// A PhiloxStream's key and salt (base/philox.cc), computed on the host.
struct PhiloxKey {
  uint32_t k0, k1, salt;
};

// PhiloxStream::uniform(index, lane): 24 random bits on a 2^-24 grid.
__device__ __forceinline__ float philox_uniform(const PhiloxKey& key, uint64_t index,
                                                uint32_t lane) {
  const uint32_t w = philox_word0(static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                                  lane, key.salt, key.k0, key.k1);
  return __fmul_rn(static_cast<float>(w >> 8), 1.0f / 16777216.0f);
}

}  // namespace tessel::cuda
