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
//
// The fused attention kernels do work that grows with the square of the
// context while their bytes grow linearly, so a byte rate measured at
// context 128 prices long contexts far too fast. measure_attention_rates()
// times them at a representative context (a one-block GPT, 4 heads of 64,
// context 1024; quick: 512) and reports their FLOPs per second, the FLOPs
// counted as the cost model charges them (kernel_work.h: causal halved).
#pragma once

#include <string>
#include <vector>

#include "tessel/compile/config.h"
#include "tessel/plan/profile/hardware_model.h"

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

// The FLOP rate of a fused attention kernel ("attention" or
// "attention_grad") in one number format at one thread count.
struct AttentionRate {
  std::string op;
  Precision precision = Precision::kF32;
  int threads = 1;
  double gflops = 0;  // kernel_work_flops() per second, 1e9
};

// The one-block causal GPT whose fused attention measure_attention_rates()
// times (batch 1, context 1024, quick 512; head dim 64) in `precision`.
TrainConfig attention_rate_config(bool quick, Precision precision);

// Each attention instruction's median of its timed steps (quick: 3, else 5)
// after one warm-up, at each thread count, in each of `precisions`.
std::vector<AttentionRate> measure_attention_rates(const std::vector<int>& thread_counts,
                                                   const std::vector<Precision>& precisions,
                                                   bool quick);

}  // namespace tessel::plan
