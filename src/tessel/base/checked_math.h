// Overflow-checked products of sizes: a shape or config whose element or
// byte count does not fit in int64 is an error naming what overflowed,
// never a silently negative size.
#pragma once

#include <cstdint>
#include <string>

#include "tessel/base/error.h"

namespace tessel {

// a * b, or throws "`what` overflows (a x b)". Both must be >= 0.
inline int64_t checked_mul(int64_t a, int64_t b, const std::string& what) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    TS_THROW(what, " overflows a 64-bit count (", a, " x ", b, ")");
  return out;
}

}  // namespace tessel
