// A seeded shuffle of [0, n) computed one position at a time.
//
// at(epoch, i) is the sample at position i of epoch `epoch`: a permutation of
// [0, n) for each epoch, a pure function of (seed, name, n, epoch, i). It
// holds no table (a keyed Feistel network over the next even power of two,
// cycle-walked into [0, n); Philox as its round function), so any rank can
// compute any position, nothing depends on how many ranks there are, and a
// run resumes from one number (the samples consumed). O(1) per position:
// on average under 4 walks of 6 rounds.
#pragma once

#include <cstdint>
#include <string_view>

#include "tessel/base/philox.h"

namespace tessel {

class SampleOrder {
 public:
  // Throws if n < 1.
  SampleOrder(uint64_t seed, std::string_view name, uint64_t n);
  uint64_t size() const { return n_; }
  // The sample at position i (< size()) of `epoch` (< 2^28).
  uint64_t at(uint64_t epoch, uint64_t i) const;

 private:
  uint64_t permute(uint64_t epoch, uint64_t x) const;  // a permutation of [0, 2^(2*half_bits_))
  PhiloxStream stream_;
  uint64_t n_;
  int half_bits_ = 1;
};

}  // namespace tessel
