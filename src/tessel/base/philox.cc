#include "tessel/base/philox.h"

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
