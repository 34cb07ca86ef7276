// How much longer an einsum takes inside a training program than the GEMM
// grid prices it, by the size of the product.
//
// The grid (gemm_grid.h) times each shape alone, run after run on the same
// operands, so they stay in cache. In a program an einsum reads activations
// written many kernels earlier and weights last touched a pass ago, after
// kernels that filled the cache with other data. Small products pay for
// that the most: on this machine's Zen 3 at 1 thread, the 128-row MLP and
// projection products of the benchmark GPT took 5-27% and its attention
// products 42-56% longer in the program than alone on their exact shapes,
// the 1,024-row ones about the same (docs/planner.md, "The machine profile").
//
// measure_in_situ() runs the one-block reference GPT's training program
// (kernel_rate_config) at 1, 2, 4 and 8 sequences of 128 tokens (quick: 1
// and 8) and times every einsum instruction (its median run,
// instruction_timing.h) against what the cost model charges it on
// `grid_only`, a profile without in-situ factors (einsum_seconds: the GEMM
// plus its scratch copies). Per thread count the einsums are binned by
// log2 of their FLOPs, one octave a bin; a bin's factor is its summed
// measured time over its summed charge, placed at the charge-weighted mean
// log2 FLOPs of its members. The factor also absorbs the grid's own error
// at the reference's shapes.
//
// InSituCurve interpolates the factor linearly in log2 FLOPs between the
// points of a thread count and in threads between measured thread counts
// (by_threads.h), clamped beyond both. A point below 1 counts as 1, as the
// co-run factor does (the profile keeps what was measured): on Zen 3 the
// points of the 512- and 1,024-row products came out 0.87-1.02 at 1 thread
// and 0.61-1.06 at 2 threads in three calibrations, noise of the size of
// the effect; re-predicting one quiet window's 20 runs of gpt-bench with
// them taken as 1 gave MAPE 6.7%, Spearman 0.949 and the top plan the best
// measured one (docs/planner.md, "Validation"). Immutable; an empty curve is factor 1.
#pragma once

#include <string>
#include <vector>

#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

struct InSituPoint {
  int threads = 1;
  double log2_flops = 0;  // of one einsum instruction (2 x batch x m x n x k)
  double factor = 1;      // measured in the program / charged by the grid
};

class InSituCurve {
 public:
  InSituCurve() = default;
  // Throws, starting with `where` (file and key), on threads < 1, a factor
  // that is not positive, or two points of one thread count at the same
  // log2_flops.
  InSituCurve(std::vector<InSituPoint> points, const std::string& where);

  bool empty() const { return lines_.empty(); }
  // The factor for an einsum of `flops` FLOPs at `threads` threads (1 when empty).
  double factor(double flops, int threads) const;

 private:
  struct Line {  // the points of one measured thread count
    int threads = 1;
    std::vector<InSituPoint> points;  // sorted by log2_flops
    double at(double log2_flops) const;
  };
  std::vector<Line> lines_;  // one per thread count
};

// Measures the curve's points at each thread count (see above), with the
// reference program compiled in `precision` (bf16: against the bf16 grid).
std::vector<InSituPoint> measure_in_situ(const HardwareModel& grid_only,
                                         const std::vector<int>& thread_counts, bool quick,
                                         Precision precision = Precision::kF32);

}  // namespace tessel::plan
