#include "tessel/base/philox.h"

#include <algorithm>
#include <cmath>

namespace tessel {

uint64_t hash_name(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

PhiloxStream::PhiloxStream(uint64_t seed, std::string_view name)
    : PhiloxStream(seed, hash_name(name)) {}

PhiloxStream::PhiloxStream(uint64_t seed, uint64_t name_hash) {
  uint64_t mixed = seed * 0x9E3779B97F4A7C15ull ^ name_hash;
  key_ = {static_cast<uint32_t>(mixed), static_cast<uint32_t>(mixed >> 32)};
  salt_ = static_cast<uint32_t>(name_hash >> 32) ^ static_cast<uint32_t>(seed);
}

std::array<uint32_t, 4> PhiloxStream::bits(uint64_t index, uint32_t lane) const {
  return philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), lane, salt_},
                    key_);
}

float PhiloxStream::uniform(uint64_t index, uint32_t lane) const {
  // 24 random bits give every float in [0,1) on a 2^-24 grid.
  return static_cast<float>(bits(index, lane)[0] >> 8) * (1.0f / 16777216.0f);
}

void PhiloxStream::uniforms(uint64_t first, int64_t stride, int64_t n, uint32_t lane,
                            float* out) const {
  // philox4x32 on kLanes counters at once, written as loops over the lanes
  // so the compiler vectorises them (32 x 32 -> 64-bit products).
  constexpr int kLanes = 16;
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int64_t at = 0; at < n; at += kLanes) {
    uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
    for (int j = 0; j < kLanes; ++j) {
      const uint64_t index = first + static_cast<uint64_t>((at + j) * stride);
      c0[j] = static_cast<uint32_t>(index);
      c1[j] = static_cast<uint32_t>(index >> 32);
      c2[j] = lane;
      c3[j] = salt_;
    }
    uint32_t k0 = key_[0], k1 = key_[1];
    for (int round = 0; round < 10; ++round) {
#pragma omp simd
      for (int j = 0; j < kLanes; ++j) {
        const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0[j];
        const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2[j];
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
        c1[j] = static_cast<uint32_t>(p1);
        c3[j] = static_cast<uint32_t>(p0);
        c0[j] = n0;
        c2[j] = n2;
      }
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    const int64_t m = std::min<int64_t>(kLanes, n - at);
    for (int64_t j = 0; j < m; ++j)
      out[at + j] = static_cast<float>(c0[j] >> 8) * (1.0f / 16777216.0f);
  }
}

float PhiloxStream::normal(uint64_t index, uint32_t lane) const {
  auto w = bits(index, lane);
  double u1 = (static_cast<double>(w[0]) + 1.0) / 4294967297.0;  // (0, 1]
  double u2 = static_cast<double>(w[1]) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t PhiloxStream::below(uint64_t bound, uint64_t index, uint32_t lane) const {
  auto w = bits(index, lane);
  uint64_t wide = (static_cast<uint64_t>(w[0]) << 32) | w[1];
  return wide % bound;
}

}  // namespace tessel
