// bf16 rounding (nearest, ties to even; NaN kept; overflow to infinity) and
// exact widening, against hand-worked bit patterns and oneDNN's reorder
// where this CPU has one.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/kernels/einsum_bf16.h"

namespace tessel::kernels {
namespace {

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

TEST(Bf16Round, NearestTiesToEven) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even one, 1.
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f818000u)), 0x3f82);
  // Just above the halfway point rounds up; just below rounds down.
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(-2.5f), 0xc020);
  EXPECT_EQ(f32_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
}

TEST(Bf16Round, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_bf16_bits(inf), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(-inf), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(std::nanf("")))));
  // A NaN whose payload sits in the low half only stays NaN (not infinity),
  // and a negative NaN keeps its sign.
  EXPECT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(from_bits(0x7f800001u)))));
  EXPECT_EQ(f32_to_bf16_bits(from_bits(0xffffffffu)) & 0x8000, 0x8000);
  // The largest f32 rounds past the largest finite bf16: infinity.
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
}

TEST(Bf16Round, BulkFormsAgreeAndWideningIsExact) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  const int64_t n = 100000;  // above the parallel threshold
  std::vector<float> x(n), in_f32(n), widened(n);
  for (float& v : x) v = dist(rng);
  std::vector<uint16_t> bits(n);
  round_to_bf16(x.data(), bits.data(), n);
  round_bf16_in_f32(x.data(), in_f32.data(), n);
  widen_bf16(bits.data(), widened.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(bits[i], f32_to_bf16_bits(x[i])) << i;
    ASSERT_EQ(in_f32[i], widened[i]) << i;
    // Relative rounding error at most 2^-8 (half of bf16's 2^-7 spacing at 1).
    ASSERT_LE(std::fabs(widened[i] - x[i]), std::ldexp(std::fabs(x[i]), -8)) << i;
    ASSERT_EQ(f32_to_bf16_bits(widened[i]), bits[i]) << "rounding is idempotent: " << i;
  }
}

// The weight copy (Bf16Convert: oneDNN's reorder where it has bf16, else
// this loop) rounds exactly like f32_to_bf16_bits.
TEST(Bf16Round, WeightCopyRoundsTheSame) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  const int64_t n = 4099;
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  std::vector<uint16_t> bits(n);
  Bf16Convert(n).run(x.data(), bits.data());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits[i], f32_to_bf16_bits(x[i])) << i;
}

}  // namespace
}  // namespace tessel::kernels
