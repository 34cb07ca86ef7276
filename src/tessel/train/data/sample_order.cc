#include "tessel/train/data/sample_order.h"

#include "tessel/base/error.h"

namespace tessel {

constexpr int kRounds = 6;
constexpr uint64_t kMaxEpochs = uint64_t{1} << 28;  // epoch * kRounds + round fits a lane

SampleOrder::SampleOrder(uint64_t seed, std::string_view name, uint64_t n)
    : stream_(seed, name), n_(n) {
  if (n < 1) TS_THROW("sample order '", name, "': no samples to order");
  while (half_bits_ < 32 && (uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
}

uint64_t SampleOrder::permute(uint64_t epoch, uint64_t x) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (int round = 0; round < kRounds; ++round) {
    const auto w = stream_.bits(right, static_cast<uint32_t>(epoch * kRounds + round));
    const uint64_t f = ((static_cast<uint64_t>(w[0]) << 32) | w[1]) & mask;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t SampleOrder::at(uint64_t epoch, uint64_t i) const {
  if (i >= n_) TS_THROW("sample order: position ", i, " is past its ", n_, " samples");
  if (epoch >= kMaxEpochs)
    TS_THROW("sample order: epoch ", epoch, " is past the ", kMaxEpochs, " epochs it orders");
  // Cycle-walking: the domain is under 4n, so on average under 4 steps.
  uint64_t x = i;
  do x = permute(epoch, x);
  while (x >= n_);
  return x;
}

}  // namespace tessel
