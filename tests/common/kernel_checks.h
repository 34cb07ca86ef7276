// Checks the CPU kernel tests share: seeded random operands, closeness to a
// reference with a relative and an absolute tolerance, bitwise equality, and
// bitwise independence from the OpenMP thread count.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "tessel/base/philox.h"

namespace tessel::kernels {

using Vec = std::vector<float>;

inline Vec random_vec(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  PhiloxStream stream(seed, "kernels_test");
  Vec v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * stream.uniform(i);
  return v;
}

// |got - want| <= rtol |want| + atol * magnitude, magnitude defaulting to max |want|.
inline void expect_close(const Vec& got, const Vec& want, double rtol = 1e-5, double atol = 1e-6,
                         double magnitude = -1.0) {
  ASSERT_EQ(got.size(), want.size());
  if (magnitude < 0) {
    magnitude = 0.0;
    for (float w : want) magnitude = std::max(magnitude, std::fabs(static_cast<double>(w)));
    magnitude = std::max(magnitude, 1e-30);
  }
  int failures = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    const double tol = rtol * std::fabs(w) + atol * magnitude;
    if (!(std::fabs(g - w) <= tol)) {
      ADD_FAILURE() << "index " << i << ": got " << g << ", want " << w << " (tol " << tol << ")";
      if (++failures >= 5) return;
    }
  }
}

inline void expect_bitwise(const Vec& a, const Vec& b) {
  ASSERT_EQ(a.size(), b.size());
  // memcmp of an empty vector's null data() is undefined, even for 0 bytes.
  if (!a.empty()) {
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  }
}

// Runs f with 1, 2 and 3 OpenMP threads (twice with 2) and checks the outputs
// are bitwise identical.
inline void expect_thread_independent(const std::function<Vec()>& f) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Vec one = f();
  omp_set_num_threads(2);
  const Vec two = f();
  const Vec two_again = f();
  omp_set_num_threads(3);
  const Vec three = f();
  omp_set_num_threads(saved);
  expect_bitwise(one, two);
  expect_bitwise(two, two_again);
  expect_bitwise(one, three);
}

}  // namespace tessel::kernels
