// The measured throughput of each kind of non-GEMM kernel, for the cost model.
//
// The elementwise and row bandwidths of machine_profile.h stand for every
// memory-bound kernel alike; real kernels differ (softmax and GELU spend
// their time in exp and tanh, LayerNorm's backward makes several passes).
// measure_kernel_rates() runs one real training step of a one-block GPT of
// the benchmark's width (d_model 384, 6 heads, context 128, batch 8; quick:
// batch 4) through Program, times every instruction between the program's
// progress-hook calls, and reports per op kind the bytes its instructions
// read and write per second: the rate the cost model charges that kind's
// instructions (HardwareModel::kernel_seconds). GEMMs (einsum) are measured
// by the GEMM grid instead and are not reported here.
#pragma once

#include <string>
#include <vector>

#include "tessel/compile/config.h"

namespace tessel::plan {

struct KernelRate {
  std::string op;  // op_name() of the kind: "softmax", "layer_norm", ...
  int threads = 1;
  double gbs = 0;  // bytes read + written per second, 1e9
};

// The one-block GPT whose training step both measure_kernel_rates() and the
// co-run calibration (calibrate_corun.h) time.
TrainConfig kernel_rate_config(bool quick);

// Each instruction's median of its timed steps (quick: 3, else 5) after one
// warm-up, at each thread count.
std::vector<KernelRate> measure_kernel_rates(const std::vector<int>& thread_counts, bool quick);

}  // namespace tessel::plan
