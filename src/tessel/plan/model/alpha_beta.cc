#include "tessel/plan/model/alpha_beta.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

double piecewise_seconds(const std::vector<std::pair<double, double>>& samples, double bytes,
                         double floor_s, double fallback_beta) {
  TS_CHECK(!samples.empty(), "piecewise_seconds: no samples");
  if (samples.size() == 1) {
    const auto [x, t] = samples.front();
    return bytes <= x ? std::max(floor_s, t) : t + fallback_beta * (bytes - x);
  }
  size_t i = 0;  // the segment [i, i + 1] used
  while (i + 2 < samples.size() && bytes > samples[i + 1].first) ++i;
  const auto [x0, t0] = samples[i];
  const auto [x1, t1] = samples[i + 1];
  const double t = t0 + (t1 - t0) * (bytes - x0) / (x1 - x0);
  return bytes < x0 ? std::max(floor_s, t) : t;
}

namespace {

using Samples = std::vector<std::pair<double, double>>;

// Sum of squared log ratios of the model to the samples; infinite when the
// model predicts 0 for a sample.
double log_error(const Samples& samples, double alpha, double beta) {
  double sum = 0;
  for (const auto& [x, t] : samples) {
    const double model = alpha + beta * x;
    if (!(model > 0)) return std::numeric_limits<double>::infinity();
    const double r = std::log(model / t);
    sum += r * r;
  }
  return sum;
}

// Golden-section minimum of f over log-spaced values in [lo, hi] (lo > 0).
template <typename F>
double golden_log(F f, double lo, double hi) {
  double a = std::log(lo), b = std::log(hi);
  const double g = (std::sqrt(5.0) - 1) / 2;
  double c = b - g * (b - a), d = a + g * (b - a);
  double fc = f(std::exp(c)), fd = f(std::exp(d));
  for (int i = 0; i < 80; ++i) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - g * (b - a);
      fc = f(std::exp(c));
    } else {
      a = c, c = d, fc = fd;
      d = a + g * (b - a);
      fd = f(std::exp(d));
    }
  }
  return std::exp((a + b) / 2);
}

}  // namespace

AlphaBeta fit_alpha_beta(const std::vector<std::pair<double, double>>& samples) {
  TS_CHECK(!samples.empty(), "fit_alpha_beta: no samples");
  double t_min = std::numeric_limits<double>::infinity(), t_max = 0, beta_max = 0;
  for (const auto& [x, t] : samples) {
    TS_CHECK(t > 0 && x >= 0, "fit_alpha_beta: a sample of ", x, " bytes takes ", t, " s");
    t_min = std::min(t_min, t);
    t_max = std::max(t_max, t);
    if (x > 0) beta_max = std::max(beta_max, t / x);
  }
  // The best alpha for a given beta: 0, or a golden-section search.
  auto best_alpha = [&](double beta) {
    const double searched =
        golden_log([&](double a) { return log_error(samples, a, beta); }, 1e-6 * t_min, t_max);
    return log_error(samples, 0, beta) < log_error(samples, searched, beta) ? 0.0 : searched;
  };
  auto error_at = [&](double beta) { return log_error(samples, best_alpha(beta), beta); };
  // Coarse scan of beta over 12 decades below the largest t/x (and 0), then refine.
  double best_beta = 0, best_error = error_at(0);
  for (int i = 0; i <= 120 && beta_max > 0; ++i) {
    const double beta = beta_max * std::pow(10.0, -i / 10.0);
    const double e = error_at(beta);
    if (e < best_error) best_beta = beta, best_error = e;
  }
  if (best_beta > 0) {
    const double refined =
        golden_log(error_at, best_beta * std::pow(10.0, -0.1), best_beta * std::pow(10.0, 0.1));
    if (error_at(refined) < best_error) best_beta = refined;
  }
  return {best_alpha(best_beta), best_beta};
}

}  // namespace tessel::plan
