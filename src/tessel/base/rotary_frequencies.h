// The frequencies of rotary position embeddings (RoPE), with Llama 3.1's
// frequency scaling for long context.
//
// Pair i of a rotated dim of `cols` elements turns by pos * f_i radians,
// f_i = theta^(-2i / cols). Llama 3.1 (Meta's apply_scaling) rescales them
// by wavelength w = 2 pi / f against the context it was first trained on
// (original_context, L): w < L / high_freq_factor keeps f; w > L /
// low_freq_factor divides it by factor; in between it blends the two with
// s = (L / w - low_freq_factor) / (high_freq_factor - low_freq_factor):
// (1 - s) f / factor + s f. factor 0 means no scaling. In a graph the
// scaling travels as text in the rotary op's attrs (rotary_scaling_text).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace tessel {

struct RotaryScaling {
  double factor = 0;  // 0: none
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  double original_context = 8192;
  bool enabled() const { return factor > 0; }
};

inline double rotary_frequency(double theta, int64_t pair, int64_t cols, const RotaryScaling& s) {
  const double f = std::pow(theta, -2.0 * static_cast<double>(pair) / static_cast<double>(cols));
  if (!s.enabled()) return f;
  const double wavelength = 2.0 * M_PI / f;
  if (wavelength < s.original_context / s.high_freq_factor) return f;
  if (wavelength > s.original_context / s.low_freq_factor) return f / s.factor;
  const double smooth = (s.original_context / wavelength - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1.0 - smooth) * f / s.factor + smooth * f;
}

// "" for none, else "llama3 FACTOR LOW HIGH CONTEXT" (round-trips exactly).
std::string rotary_scaling_text(const RotaryScaling& s);
// Throws naming the text when it is neither "" nor that form, or its values
// are out of range (factor >= 1, 0 < low < high, context > 0).
RotaryScaling parse_rotary_scaling(const std::string& text);

}  // namespace tessel
