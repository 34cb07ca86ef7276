// random_values(n, seed): n floats uniform in [-1, 1), the same for a seed on
// every machine (mt19937), for kernel tests' operands.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tessel {

inline std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace tessel
