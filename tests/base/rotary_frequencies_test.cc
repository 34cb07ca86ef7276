// Rotary frequencies (base/rotary_frequencies.h): Llama 3.1's scaling
// against a transcription of Meta's apply_scaling loop (llama/model.py,
// Llama 3.1), the bands it leaves alone and divides, and the text form the
// rotary op's attrs carry.
#include "tessel/base/rotary_frequencies.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/error_of.h"

namespace tessel {
namespace {

// Meta's loop, step for step: freqs = 1 / theta^(arange(0, dim, 2) / dim),
// then per frequency by wavelength against the original context.
std::vector<double> meta_scaled(double theta, int dim, double factor, double low, double high,
                                double old_context) {
  std::vector<double> out;
  const double low_wavelen = old_context / low, high_wavelen = old_context / high;
  for (int j = 0; j < dim; j += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(j) / dim);
    const double wavelen = 2 * M_PI / freq;
    if (wavelen < high_wavelen) {
      out.push_back(freq);
    } else if (wavelen > low_wavelen) {
      out.push_back(freq / factor);
    } else {
      const double smooth = (old_context / wavelen - low) / (high - low);
      out.push_back((1 - smooth) * freq / factor + smooth * freq);
    }
  }
  return out;
}

TEST(RotaryFrequencies, Llama31ScalingMatchesMetasLoop) {
  const RotaryScaling s{8, 1, 4, 8192};
  const std::vector<double> want = meta_scaled(500000, 128, 8, 1, 4, 8192);
  int kept = 0, divided = 0, blended = 0;
  for (int i = 0; i < 64; ++i) {
    const double plain = rotary_frequency(500000, i, 128, RotaryScaling{});
    const double got = rotary_frequency(500000, i, 128, s);
    EXPECT_NEAR(got, want[i], 1e-15 * want[i]) << "pair " << i;
    kept += got == plain;
    divided += std::abs(got - plain / 8) <= 1e-15 * plain;
    blended += got < plain && got > plain / 8;
  }
  // Every band occurs at Llama 3.1's sizes.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);
  EXPECT_EQ(kept + divided + blended, 64);
}

TEST(RotaryFrequencies, TextRoundTripsAndBadTextIsNamed) {
  EXPECT_EQ(rotary_scaling_text(RotaryScaling{}), "");
  EXPECT_FALSE(parse_rotary_scaling("").enabled());
  const RotaryScaling s{8, 1, 4, 8192};
  const RotaryScaling back = parse_rotary_scaling(rotary_scaling_text(s));
  EXPECT_EQ(back.factor, 8);
  EXPECT_EQ(back.low_freq_factor, 1);
  EXPECT_EQ(back.high_freq_factor, 4);
  EXPECT_EQ(back.original_context, 8192);
  EXPECT_NE(error_of([] { parse_rotary_scaling("yarn 8 1 4 8192"); }).find("'yarn 8 1 4 8192'"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_rotary_scaling("llama3 8 4 1 8192"); }).find("low_freq_factor"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel
