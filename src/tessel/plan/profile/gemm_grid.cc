#include "tessel/plan/profile/gemm_grid.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "tessel/base/error.h"

namespace tessel::plan {
namespace {

// Two coordinates closer than this are one grid level.
constexpr double kLevelTolerance = 1e-6;

// Index i and weight t with v between levels[i] and levels[i + 1] (t = 0 at
// or below the first level, i = last with t = 0 at or above the last).
std::pair<size_t, double> locate(const std::vector<double>& levels, double v) {
  if (levels.size() == 1 || v <= levels.front()) return {0, 0.0};
  if (v >= levels.back()) return {levels.size() - 1, 0.0};
  size_t i = std::upper_bound(levels.begin(), levels.end(), v) - levels.begin() - 1;
  return {i, (v - levels[i]) / (levels[i + 1] - levels[i])};
}

std::vector<double> distinct_levels(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::vector<double> levels;
  for (double v : values)
    if (levels.empty() || v - levels.back() > kLevelTolerance) levels.push_back(v);
  return levels;
}

size_t level_index(const std::vector<double>& levels, double v) {
  for (size_t i = 0; i < levels.size(); ++i)
    if (std::abs(levels[i] - v) <= kLevelTolerance) return i;
  TS_CHECK(false, "value ", v, " is no grid level");
}

}  // namespace

double gemm_log_flops(int64_t m, int64_t n, int64_t k) {
  return std::log2(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
}

double gemm_log_aspect(int64_t m, int64_t n, int64_t k) {
  const double volume = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double thin = static_cast<double>(std::min({m, n, k}));
  return std::max(0.0, std::log2(volume) / 3 - std::log2(thin));
}

GemmGrid::GemmGrid(const std::vector<GemmPoint>& points, const std::string& where) {
  std::map<std::pair<bool, int>, std::vector<const GemmPoint*>> classes;
  for (size_t i = 0; i < points.size(); ++i) {
    const GemmPoint& p = points[i];
    if (p.threads < 1 || p.batch < 1 || p.m < 1 || p.n < 1 || p.k < 1 || !(p.gflops > 0))
      TS_THROW(where, "[", i, "]: threads, batch, m, n, k and gflops must be positive");
    classes[{p.batch > 1, p.threads}].push_back(&p);
  }
  for (const auto& [key, members] : classes) {
    Surface s;
    s.batched = key.first;
    s.threads = key.second;
    std::vector<double> xs, ys;
    for (const GemmPoint* p : members) {
      xs.push_back(gemm_log_flops(p->m, p->n, p->k));
      ys.push_back(gemm_log_aspect(p->m, p->n, p->k));
    }
    s.xs = distinct_levels(xs);
    s.ys = distinct_levels(ys);
    std::vector<int> filled(s.xs.size() * s.ys.size(), 0);
    s.log2_gflops.assign(filled.size(), 0);
    for (size_t i = 0; i < members.size(); ++i) {
      const size_t cell = level_index(s.ys, ys[i]) * s.xs.size() + level_index(s.xs, xs[i]);
      if (filled[cell]++)
        TS_THROW(where, ": two points at the same grid position (", members[i]->m, "x",
                 members[i]->n, "x", members[i]->k, ", ", s.threads, " threads)");
      s.log2_gflops[cell] = std::log2(members[i]->gflops);
    }
    for (size_t cell = 0; cell < filled.size(); ++cell)
      if (!filled[cell])
        TS_THROW(where, ": the ", s.batched ? "batched" : "unbatched", " points at ", s.threads,
                 " threads are not a full grid: nothing at log2 flops ", s.xs[cell % s.xs.size()],
                 ", log2 aspect ", s.ys[cell / s.xs.size()]);
    surfaces_.push_back(std::move(s));
  }
}

double GemmGrid::Surface::at(double x, double y) const {
  const auto [i, tx] = locate(xs, x);
  const auto [j, ty] = locate(ys, y);
  const size_t nx = xs.size();
  auto v = [&](size_t yi, size_t xi) { return log2_gflops[yi * nx + xi]; };
  const size_t i1 = std::min(i + 1, nx - 1), j1 = std::min(j + 1, ys.size() - 1);
  const double low = v(j, i) + tx * (v(j, i1) - v(j, i));
  const double high = v(j1, i) + tx * (v(j1, i1) - v(j1, i));
  return std::exp2(low + ty * (high - low));
}

double GemmGrid::surface_gflops(bool batched, double x, double y, int threads) const {
  std::vector<const Surface*> cls;
  for (const Surface& s : surfaces_)
    if (s.batched == batched) cls.push_back(&s);
  if (cls.empty())  // only the other class was measured
    for (const Surface& s : surfaces_) cls.push_back(&s);
  const Surface* below = nullptr;
  const Surface* above = nullptr;
  for (const Surface* s : cls) {
    if (s->threads <= threads && (!below || s->threads > below->threads)) below = s;
    if (s->threads >= threads && (!above || s->threads < above->threads)) above = s;
  }
  if (!below) return above->at(x, y);
  if (!above || above == below) return below->at(x, y);
  const double t = double(threads - below->threads) / (above->threads - below->threads);
  return below->at(x, y) + t * (above->at(x, y) - below->at(x, y));
}

double GemmGrid::gflops(int64_t batch, int64_t m, int64_t n, int64_t k, int threads) const {
  TS_CHECK(!empty() && threads >= 1 && batch >= 1 && m >= 1 && n >= 1 && k >= 1,
           "GemmGrid::gflops(", batch, ", ", m, ", ", n, ", ", k, ", threads ", threads, ")");
  const bool batched = batch > 1;
  const int used = batched ? static_cast<int>(std::min<int64_t>(threads, batch)) : threads;
  return surface_gflops(batched, gemm_log_flops(m, n, k), gemm_log_aspect(m, n, k), used);
}

}  // namespace tessel::plan
