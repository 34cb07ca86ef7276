// Einsums measured on their exact shapes: the table a machine profile keeps
// ("einsums") so that the cost model charges an einsum the time its own
// compiled kernel took, instead of the GEMM grid's estimate for its size and
// aspect (gemm_grid.h), which misses what the grid's coordinates do not see
// (which of m, n, k is thin, transposed operands, rows of a power-of-two
// length; on Zen 3 the grid priced gpt-pipeline's weight gradients at
// about 70 GFLOP/s and they ran at 26).
//
// An entry is keyed by the three shapes (names, sizes and order: the
// kernel's plan is a function of them, kernels/einsum.h) and the thread
// count. time_einsum_alone() runs plan_einsum + einsum on buffers of those
// shapes, alone and hot in cache, as the grid does; the in-situ factor
// (einsum_in_situ.h) is measured against the same timing, so a measured
// einsum is charged time alone x factor.
//
// einsums_to_measure() runs a plan search (every candidate costed exactly)
// on a wrapper of the hardware that records each einsum the cost model
// prices without a measurement; `tessel plan --measure-einsums` measures
// those and adds them to the profile before it plans.
#pragma once

#include <string>
#include <vector>

#include "tessel/base/shape.h"
#include "tessel/plan/search.h"

namespace tessel::plan {

struct EinsumShapes {
  Shape a, b, out;
  int threads = 1;
};

struct MeasuredEinsum {
  EinsumShapes shapes;
  double seconds = 0;  // median run alone
};

// "a;b;out@threads", each shape as Shape::to_string().
std::string einsum_key(const Shape& a, const Shape& b, const Shape& out, int threads);

// Median seconds of the einsum alone at `threads` OpenMP threads: at least
// 5 runs and `min_seconds` after a warm-up. Restores the thread count.
double time_einsum_alone(const EinsumShapes& e, double min_seconds);

// The f32 einsums a search for `request` prices on `hw` without a
// measurement, each once, in the order first priced.
std::vector<EinsumShapes> einsums_to_measure(const PlanRequest& request, const HardwareModel& hw);

// Times each (time_einsum_alone, 20 ms each); prints one line to stderr
// when `progress`.
std::vector<MeasuredEinsum> measure_einsums(const std::vector<EinsumShapes>& todo, bool progress);

}  // namespace tessel::plan
