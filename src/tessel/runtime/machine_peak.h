// Measured floating-point peak of this machine.
//
// Runs independent fused multiply-add chains (no memory traffic) on a given
// number of OpenMP threads and reports the achieved rate, so roofline and
// MFU figures compare against what the cores actually deliver rather than a
// datasheet. Counts 2 flops per FMA lane (f32, 8 lanes per AVX2 register).
#pragma once

namespace tessel {

// Achieved f32 GFLOP/s summed over `threads` OpenMP threads running FMA
// chains for about `seconds` in total, split into 4 equal trials; returns the
// best trial (total work over the wall time until the slowest thread ends).
// Uses AVX2 FMA when the CPU supports it, else a scalar loop. Throws if
// threads < 1 or seconds <= 0.
double measure_fma_peak_gflops(int threads, double seconds = 0.2);

}  // namespace tessel
