#include "tessel/plan/alpha_beta.h"

#include "tessel/base/error.h"

namespace tessel::plan {

double ring_steps(CollectiveKind kind, int ranks) {
  if (ranks < 2) return 0;
  const double p = ranks;
  return kind == CollectiveKind::kAllReduce ? 2 * (p - 1) : p - 1;
}

double ring_bandwidth_factor(CollectiveKind kind, int ranks) {
  if (ranks < 2) return 0;
  const double p = ranks;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2 * (p - 1) / p;
    case CollectiveKind::kAllGather:
      return p - 1;  // payload = one shard
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return (p - 1) / p;
  }
  return 0;
}

double ring_collective_seconds(CollectiveKind kind, double bytes, int ranks,
                               const AlphaBeta& link) {
  return ring_steps(kind, ranks) * link.alpha_s +
         ring_bandwidth_factor(kind, ranks) * bytes * link.beta_s_per_byte;
}

AlphaBeta fit_alpha_beta(const std::vector<std::pair<double, double>>& samples) {
  TS_CHECK(!samples.empty(), "fit_alpha_beta: no samples");
  // Weighted normal equations for min sum w (alpha + beta x - t)^2, w = 1/t^2.
  double sw = 0, sx = 0, sxx = 0, st = 0, sxt = 0;
  for (const auto& [x, t] : samples) {
    TS_CHECK(t > 0, "fit_alpha_beta: a sample takes ", t, " s");
    const double w = 1 / (t * t);
    sw += w;
    sx += w * x;
    sxx += w * x * x;
    st += w * t;
    sxt += w * x * t;
  }
  AlphaBeta fit;
  const double det = sw * sxx - sx * sx;
  if (det > 1e-12 * sw * sxx) {
    fit.alpha_s = (sxx * st - sx * sxt) / det;
    fit.beta_s_per_byte = (sw * sxt - sx * st) / det;
  } else {  // one distinct size: all latency
    fit.alpha_s = st / sw;
  }
  if (fit.alpha_s < 0) fit = {0, sxx > 0 ? sxt / sxx : 0};
  if (fit.beta_s_per_byte < 0) fit = {st / sw, 0};
  return fit;
}

}  // namespace tessel::plan
