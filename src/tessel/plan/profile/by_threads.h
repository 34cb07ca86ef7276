// A measured quantity at any thread count from the counts it was measured
// at: linear in threads between the two nearest, clamped beyond them. The
// machine profile's rates and the in-situ factor's curves share it.
#pragma once

#include <vector>

namespace tessel::plan {

// `get` of the entries of `rates` (each with an int `threads`) at `threads`.
// REQUIRES: !rates.empty().
template <typename T, typename Get>
double by_threads(const std::vector<T>& rates, int threads, Get get) {
  const T* below = nullptr;
  const T* above = nullptr;
  for (const T& r : rates) {
    if (r.threads <= threads && (!below || r.threads > below->threads)) below = &r;
    if (r.threads >= threads && (!above || r.threads < above->threads)) above = &r;
  }
  if (!below) return get(*above);
  if (!above || above == below) return get(*below);
  const double t = double(threads - below->threads) / (above->threads - below->threads);
  return get(*below) + t * (get(*above) - get(*below));
}

}  // namespace tessel::plan
