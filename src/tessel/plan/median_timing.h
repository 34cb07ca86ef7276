// The timing loop every calibration measurement shares, and the buffers it
// times kernels on.
#pragma once

#include <cstdint>
#include <functional>

#include "tessel/tensor/aligned_buffer.h"

namespace tessel::plan {

// Median seconds of `fn` over at least `min_runs` runs and `min_seconds` of
// them, after one untimed warm-up run.
double median_seconds(double min_seconds, int min_runs, const std::function<void()>& fn);

// `floats` floats (at least one) of a fixed non-zero pattern.
AlignedBuffer filled_floats(int64_t floats);

}  // namespace tessel::plan
