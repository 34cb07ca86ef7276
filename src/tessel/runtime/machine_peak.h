// Measured floating-point peak of this machine.
//
// Runs independent fused multiply-add chains (no memory traffic) on a given
// number of OpenMP threads and reports the achieved rate, so roofline and
// MFU figures compare against what the cores actually deliver rather than a
// datasheet. Counts 2 flops per FMA lane (f32: 16 lanes per AVX-512 register,
// 8 per AVX2 one), 4 per bf16 dot-product lane (two products and sums) and
// 16384 per AMX tile product (16 x 16 outputs of 32 products and sums).
// The instruction set is chosen at run time from what the CPU reports, never
// assumed at build time.
#pragma once

#include <string>

namespace tessel {

// The f32 FMA the probe uses on this CPU: "avx512f", "avx2" or "scalar".
std::string fma_probe_isa();
// The bf16 probe: "amx_bf16" (tdpbf16ps tile products) where the CPU has AMX
// and Linux grants this process the tile state, else "avx512_bf16"
// (vdpbf16ps), else the f32 probe's name (bf16 is emulated in f32 units there).
std::string bf16_probe_isa();

// Achieved f32 GFLOP/s summed over `threads` OpenMP threads running FMA
// chains for about `seconds` in total, split into 4 equal trials; returns the
// best trial (total work over the wall time until the slowest thread ends).
// Uses the widest FMA the CPU has (fma_probe_isa()). Throws if threads < 1 or
// seconds <= 0.
double measure_fma_peak_gflops(int threads, double seconds = 0.2);

// The same for bf16 products with f32 accumulation (bf16_probe_isa()): the
// denominator of a bf16 run's fraction of peak.
double measure_bf16_peak_gflops(int threads, double seconds = 0.2);

}  // namespace tessel
