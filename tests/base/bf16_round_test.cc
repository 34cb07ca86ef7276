// bf16 rounding (nearest, ties to even; NaN kept; overflow to infinity) and
// exact widening, against hand-worked bit patterns; the bulk form (native
// conversion where the CPU has it) against the scalar one on any bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tessel/base/bf16.h"

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

// round_to_bf16's bulk form (AVX512-BF16's conversion where the CPU has it)
// gives f32_to_bf16_bits' bits for any f32: random bit patterns cover NaNs,
// infinities and denormals (which the instruction alone would read as 0),
// and the length leaves a tail that is no whole vector.
TEST(Bf16Round, BulkFormMatchesScalarOnAnyBits) {
  std::mt19937 rng(9);
  const int64_t n = 100003;  // above the parallel threshold, not a multiple of 32
  std::vector<float> x(n);
  for (float& v : x) v = from_bits(static_cast<uint32_t>(rng()));
  // Denormals and specials among ordinary values, alone in their vector.
  x[40] = from_bits(0x00000001u);
  x[100] = from_bits(0x807fffffu);
  x[200] = from_bits(0x7fc00000u);
  x[300] = from_bits(0xff800000u);
  for (int64_t i = 1000; i < 2000; ++i) x[i] = 0.01f * static_cast<float>(i);
  x[1500] = from_bits(0x00400000u);
  std::vector<uint16_t> bits(n);
  round_to_bf16(x.data(), bits.data(), n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(bits[i], f32_to_bf16_bits(x[i])) << i;
  EXPECT_EQ(bits[40], 0x0000);    // the smallest denormal rounds to +0 ...
  EXPECT_EQ(bits[1500], 0x0040);  // ... a large one keeps its top bits
}

}  // namespace
}  // namespace tessel::kernels
