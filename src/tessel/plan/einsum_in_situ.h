// How much longer an einsum takes inside a training program than alone, by
// the size of the product.
//
// Alone (the GEMM grid, gemm_grid.h; an einsum timed on its exact shapes,
// measured_einsums.h) an einsum runs again and again on the same operands,
// which stay in cache. In a program it reads activations written many
// kernels earlier and weights last touched a pass ago, after kernels that
// filled the cache with other data. Small products pay for that the most:
// on this machine's Zen 3 at 1 thread, the 128-row MLP products of the
// benchmark GPT took 5-27% and its attention products 42-56% longer in the
// program than alone on their exact shapes, the 1,024-row ones about the
// same.
//
// measure_in_situ() runs the one-block reference GPT's training program
// (kernel_rate_config) at 1, 2, 4 and 8 sequences of 128 tokens (quick: 1
// and 8) and times every einsum instruction (its median run,
// instruction_timing.h) against the same einsum timed alone on its exact
// shapes (measured_einsums.h: the time a profile charges a measured
// einsum). Per thread count the einsums are binned by log2 of their FLOPs,
// one octave a bin; a bin's factor is its summed time in the program over
// its summed time alone, placed at the time-alone-weighted mean log2 FLOPs
// of its members. The einsums timed alone are returned too (calibrate keeps
// them in the profile's table). The factor is the program's effect only:
// an einsum the grid prices is charged grid estimate x factor, and the
// grid's own error stays (`plan --measure-einsums` removes it).
//
// InSituCurve interpolates the factor linearly in log2 FLOPs between the
// points of a thread count and linearly in threads between measured thread
// counts, clamped beyond both. Immutable; an empty curve is factor 1.
#pragma once

#include <string>
#include <vector>

#include "tessel/plan/hardware_model.h"
#include "tessel/plan/measured_einsums.h"

namespace tessel::plan {

struct InSituPoint {
  int threads = 1;
  double log2_flops = 0;  // of one einsum instruction (2 x batch x m x n x k)
  double factor = 1;      // time in the program / time alone
};

class InSituCurve {
 public:
  InSituCurve() = default;
  // Throws, starting with `where` (file and key), on threads < 1, a factor
  // that is not positive, or two points of one thread count at the same
  // log2_flops.
  InSituCurve(std::vector<InSituPoint> points, const std::string& where);

  bool empty() const { return points_.empty(); }
  const std::vector<InSituPoint>& points() const { return points_; }
  // The factor for an einsum of `flops` FLOPs at `threads` threads (1 when empty).
  double factor(double flops, int threads) const;

 private:
  double factor_at(int threads, double log2_flops) const;  // one measured thread count
  std::vector<InSituPoint> points_;                        // sorted by (threads, log2_flops)
};

struct InSituMeasurement {
  std::vector<InSituPoint> points;
  std::vector<MeasuredEinsum> alone;  // each distinct einsum of the reference, timed alone
};

// Measures the curve's points at each thread count (see above).
InSituMeasurement measure_in_situ(const std::vector<int>& thread_counts, bool quick);

}  // namespace tessel::plan
