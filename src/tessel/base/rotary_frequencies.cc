#include "tessel/base/rotary_frequencies.h"

#include <sstream>

#include "tessel/base/error.h"

namespace tessel {

std::string rotary_scaling_text(const RotaryScaling& s) {
  if (!s.enabled()) return "";
  std::ostringstream out;
  out.precision(17);
  out << "llama3 " << s.factor << " " << s.low_freq_factor << " " << s.high_freq_factor << " "
      << s.original_context;
  return out.str();
}

RotaryScaling parse_rotary_scaling(const std::string& text) {
  RotaryScaling s;
  if (text.empty()) return s;
  std::istringstream in(text);
  std::string kind, rest;
  if (!(in >> kind >> s.factor >> s.low_freq_factor >> s.high_freq_factor >> s.original_context) ||
      kind != "llama3" || (in >> rest))
    TS_THROW("rotary scaling '", text, "' must read \"llama3 FACTOR LOW HIGH CONTEXT\"");
  if (!(s.factor >= 1) || !(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor) ||
      !(s.original_context > 0))
    TS_THROW("rotary scaling '", text,
             "': needs factor >= 1, 0 < low_freq_factor < high_freq_factor and a positive "
             "original context");
  return s;
}

}  // namespace tessel
