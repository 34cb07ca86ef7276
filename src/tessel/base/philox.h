// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
//
// A stream is keyed by (seed, name); element i of the stream is a pure
// function of (seed, name, i). Parameter initialisation, dropout masks and
// data order all draw this way, so a value never depends on which rank
// computes it or how a tensor is sharded. Stateless and thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace tessel {

// 64-bit FNV-1a hash of a name, used to key streams by tensor name.
uint64_t hash_name(std::string_view name);

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

class PhiloxStream {
 public:
  PhiloxStream(uint64_t seed, std::string_view name);
  PhiloxStream(uint64_t seed, uint64_t name_hash);

  // Four independent 32-bit words for element `index` of sub-stream `lane`.
  std::array<uint32_t, 4> bits(uint64_t index, uint32_t lane = 0) const;
  // Uniform in [0, 1).
  float uniform(uint64_t index, uint32_t lane = 0) const;
  // out[i] = uniform(first + i * stride, lane) for i in [0, n): the same
  // numbers, many counters at a time in vector registers.
  void uniforms(uint64_t first, int64_t stride, int64_t n, uint32_t lane, float* out) const;
  // Standard normal (Box-Muller on two words of the same counter).
  float normal(uint64_t index, uint32_t lane = 0) const;
  // Uniform integer in [0, bound).
  uint64_t below(uint64_t bound, uint64_t index, uint32_t lane = 0) const;

 private:
  std::array<uint32_t, 2> key_;
  uint32_t salt_;
};

}  // namespace tessel
