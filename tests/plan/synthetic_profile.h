// A machine profile with made-up figures on the calibration grid, for tests
// that must not measure anything: GFLOP/s grows with the product's size and
// the thread count and falls with its aspect; every collective and send/recv
// has alpha 10 us and beta 1 ns/byte at 2 ranks.
#pragma once

#include <cmath>

#include "tessel/plan/calibrate/calibrate_compute.h"
#include "tessel/plan/profile/machine_profile.h"

namespace tessel::plan {

inline double synthetic_gflops(const GemmPoint& p) {
  return 2.0 * gemm_log_flops(p.m, p.n, p.k) * p.threads / (1 + gemm_log_aspect(p.m, p.n, p.k)) *
         (p.batch > 1 ? 0.5 : 1.0);
}

inline MachineProfileData synthetic_profile_data() {
  MachineProfileData d;
  d.cpu_model = "Test CPU";
  d.nproc = 2;
  for (int threads : {1, 2}) {
    d.fma_peak_gflops.push_back({threads, 100.0 * threads});
    for (GemmPoint p : calibration_gemm_shapes(/*quick=*/false)) {
      p.threads = threads;
      p.gflops = synthetic_gflops(p);
      d.gemm_f32.push_back(p);
    }
    d.memory.push_back({threads, 10.0 * threads, 5.0 * threads});
  }
  for (const char* kind : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"})
    d.links.push_back({kind, 2, Link::kIntraNode, {10e-6, 1e-9}, {}});
  // Samples on the line t = 10 us + 1 ns/byte.
  for (LinkFit& l : d.links)
    for (double bytes : {4096.0, 65536.0, 1048576.0})
      l.samples.emplace_back(bytes, 10e-6 + 1e-9 * bytes);
  return d;
}

}  // namespace tessel::plan
