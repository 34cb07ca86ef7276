// The alpha-beta (latency-bandwidth) model of a transfer, and the ring
// algorithms' step counts and bandwidth factors for each collective.
//
// A message of b bytes costs alpha + beta * b. A ring collective over p ranks
// runs steps(kind, p) latency-bound steps and moves bandwidth_factor(kind, p)
// * bytes per rank, with `bytes` the payload as HardwareModel counts it
// (comm/communicator.h's convention): all-reduce 2(p-1) steps, 2(p-1)/p of
// the full buffer; reduce-scatter and all-to-all p-1 steps, (p-1)/p of the
// full buffer; all-gather p-1 steps, (p-1) times one shard. These are the
// same wire bytes Communicator::count() records.
#pragma once

#include <utility>
#include <vector>

#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

struct AlphaBeta {
  double alpha_s = 0;          // latency, seconds
  double beta_s_per_byte = 0;  // seconds per byte

  double seconds(double bytes) const { return alpha_s + beta_s_per_byte * bytes; }
};

// Latency-bound steps of the ring algorithm (0 for p < 2).
double ring_steps(CollectiveKind kind, int ranks);
// Bytes each rank sends, per payload byte (0 for p < 2).
double ring_bandwidth_factor(CollectiveKind kind, int ranks);

// Ring time of one collective when every step costs `link` (alpha per step,
// beta per byte sent): steps * alpha + factor * bytes * beta.
double ring_collective_seconds(CollectiveKind kind, double bytes, int ranks, const AlphaBeta& link);

// Fit of t = alpha + beta * bytes to (bytes, seconds) samples, alpha and
// beta >= 0, minimising the sum of squared log ratios of model to sample:
// every size counts alike, and over- and under-estimates by the same factor
// cost the same (a least-squares fit on absolute times would ignore the small
// messages, one weighted by 1/t^2 would ignore a large one that is slower
// than the line). A coarse scan of beta, then golden-section refinement.
// REQUIRES: at least one sample, all seconds > 0 and bytes >= 0.
AlphaBeta fit_alpha_beta(const std::vector<std::pair<double, double>>& samples);

// Time of `bytes` read off measured (bytes, seconds) samples sorted by
// bytes: linear between neighbouring samples (each segment is the alpha-beta
// line through its two ends, so the result is exact at every sample and
// monotone between), the last segment's line beyond the largest sample, and
// below the smallest the first segment's line, never under `floor_s`.
// One sample: that time, plus beyond it `fallback_beta` per extra byte.
// REQUIRES: samples non-empty and sorted by bytes, ascending and distinct.
double piecewise_seconds(const std::vector<std::pair<double, double>>& samples, double bytes,
                         double floor_s, double fallback_beta);

}  // namespace tessel::plan
