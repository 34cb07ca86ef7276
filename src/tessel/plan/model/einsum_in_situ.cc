#include "tessel/plan/model/einsum_in_situ.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "tessel/base/error.h"
#include "tessel/plan/calibrate/instruction_timing.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/plan/profile/by_threads.h"
#include "tessel/plan/profile/kernel_rates.h"

namespace tessel::plan {

InSituCurve::InSituCurve(std::vector<InSituPoint> points, const std::string& where) {
  for (size_t i = 0; i < points.size(); ++i) {
    const InSituPoint& p = points[i];
    if (p.threads < 1) TS_THROW(where, "[", i, "]: threads must be at least 1, got ", p.threads);
    if (!(p.factor > 0) || !std::isfinite(p.factor))
      TS_THROW(where, "[", i, "]: factor must be positive, got ", p.factor);
    if (!std::isfinite(p.log2_flops)) TS_THROW(where, "[", i, "]: log2_flops must be finite");
  }
  std::sort(points.begin(), points.end(), [](const InSituPoint& a, const InSituPoint& b) {
    return std::make_pair(a.threads, a.log2_flops) < std::make_pair(b.threads, b.log2_flops);
  });
  for (const InSituPoint& p : points) {
    if (lines_.empty() || lines_.back().threads != p.threads) lines_.push_back({p.threads, {}});
    std::vector<InSituPoint>& line = lines_.back().points;
    if (!line.empty() && line.back().log2_flops == p.log2_flops)
      TS_THROW(where, ": two points at ", p.threads, " threads and log2_flops ", p.log2_flops);
    line.push_back(p);
  }
}

double InSituCurve::Line::at(double log2_flops) const {
  // A point below 1 counts as 1 (the profile keeps what was measured).
  auto f = [](const InSituPoint& p) { return std::max(1.0, p.factor); };
  if (log2_flops <= points.front().log2_flops) return f(points.front());
  for (size_t i = 1; i < points.size(); ++i)
    if (log2_flops <= points[i].log2_flops) {
      const InSituPoint &a = points[i - 1], &b = points[i];
      const double t = (log2_flops - a.log2_flops) / (b.log2_flops - a.log2_flops);
      return f(a) + t * (f(b) - f(a));
    }
  return f(points.back());
}

double InSituCurve::factor(double flops, int threads) const {
  if (lines_.empty() || !(flops > 0)) return 1;
  const double x = std::log2(flops);
  return by_threads(lines_, threads, [x](const Line& l) { return l.at(x); });
}

std::vector<InSituPoint> measure_in_situ(const HardwareModel& grid_only,
                                         const std::vector<int>& thread_counts, bool quick,
                                         Precision precision) {
  const std::vector<int64_t> batches =
      quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 8};
  const int repeats = quick ? 3 : 5;
  struct Bin {
    double measured = 0, charged = 0, weighted_log2 = 0;
  };
  std::map<std::pair<int, long>, Bin> bins;  // (threads, octave)
  for (int64_t batch : batches) {
    TrainConfig config = kernel_rate_config(quick);
    config.batch = batch;
    config.precision = precision_name(precision);
    const std::unique_ptr<TimedProgram> timed = timed_training_program(config);
    Program& program = *timed->program;
    const std::vector<Program::InstructionInfo> list = program.instruction_info();
    for (int threads : thread_counts) {
      const std::map<ValueId, double> typical =
          median_instruction_seconds(program, threads, repeats);
      const CostOptions options{.threads = threads, .precision = precision};
      for (const Program::InstructionInfo& ins : list) {
        const auto measured = typical.find(ins.node);
        if (!ins.einsum || measured == typical.end()) continue;
        const kernels::EinsumPlan& e = *ins.einsum;
        const double log2_flops = std::log2(2.0 * e.batch * e.m * e.n * e.k);
        const double charged = einsum_seconds(grid_only, program.graph(), ins, options);
        Bin& bin = bins[{threads, std::lround(log2_flops)}];
        bin.measured += measured->second;
        bin.charged += charged;
        bin.weighted_log2 += charged * log2_flops;
      }
    }
  }
  std::vector<InSituPoint> points;
  for (const auto& [key, bin] : bins)
    if (bin.charged > 0 && bin.measured > 0)
      points.push_back({key.first, bin.weighted_log2 / bin.charged, bin.measured / bin.charged});
  return points;
}

}  // namespace tessel::plan
