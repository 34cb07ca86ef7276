// A tensor seen as (outer, n, inner) around one of its dims: the product of
// the sizes before it, its own size, and the product of those after it
// (row-major). The kernels that work along one dim (softmax, the collectives'
// packing) take these three numbers.
#pragma once

#include <cstdint>
#include <string>

#include "tessel/base/shape.h"

namespace tessel {

struct Around {
  int64_t outer = 1, n = 1, inner = 1;
};

// REQUIRES: `x` has `dim`.
inline Around around(const Shape& x, const std::string& dim) {
  Around a;
  const int at = *x.index_of(dim);
  for (int i = 0; i < x.rank(); ++i) (i < at ? a.outer : i > at ? a.inner : a.n) *= x[i].size;
  return a;
}

}  // namespace tessel
