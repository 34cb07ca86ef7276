// The compute half of `tessel calibrate`: the FMA peak, GEMM throughput on a
// grid of shapes through the real einsum kernel path (kernels/einsum.h, so
// the profile measures what training runs), and the bandwidth of an
// elementwise and a row kernel, each at the given thread counts.
//
// The GEMM grid (gemm_grid.h for the coordinates): cube roots c of
// 64..1024 (quick: 64..512) at aspects 1, 4 and 16 — the cube c x c x c,
// 2c x 2c x c/4 and 4c x 4c x c/16, the thin dim as k like attention's head
// dim (c = 256 at aspect 4 is 512 x 512 x 64) — unbatched, plus c = 64..256
// (quick: 64..128) with batch 8 on the batched path.
//
// Where the CPU multiplies bf16 natively (AVX512-BF16 or AMX:
// kernels::cpu_has_native_bf16), the same grid is measured again through
// kernels/einsum_bf16.h with both operands in bf16 and read in place, and an
// f32 result: the matmul a bf16 program runs, without the operand
// conversions (the cost model charges those as copies, from the einsum's
// scratch). The bf16 peak (runtime/machine_peak.h) comes with it. Elsewhere
// bf16 is slower than f32 and neither is measured: the profile then prices
// f32 plans only. Each shape is timed for
// at least 40 ms (quick: 10 ms) and at least 3 runs after a warm-up; the
// median run counts.
//
// A grid point stands for every shape near it, so its rate is the median
// over the point and three variants with two of its dims moved by +1/8 and
// -1/8 (calibration_gemm_variants): one shape's own quirk does not price its
// neighbourhood. On a Zen 3 the exact cube 512 x 512 x 512
// (every leading dim 2 KiB) ran at 45-80% of 480^3, 520^3 and the 512-row
// GEMMs of a GPT (512 x 384 x 1536), and as the only aspect-1 point at
// 2^28 FLOPs it priced all of them ~25% slow (docs/planner.md).
#pragma once

#include <vector>

#include "tessel/plan/profile/machine_profile.h"

namespace tessel::plan {

// The shapes measured at each thread count (threads left at 1).
std::vector<GemmPoint> calibration_gemm_shapes(bool quick);

// A grid point and its three variants (the point first): dims of at least
// 32 moved by x1.125 / x0.875 to multiples of 8, two per variant (m up n
// down; n up k down; k up m down), smaller dims kept.
std::vector<GemmPoint> calibration_gemm_variants(const GemmPoint& point);

// Measures everything at each of `thread_counts` (each >= 1), printing one
// progress line per thread count to stderr when `progress`: a profile's
// fma_peak_gflops, bf16_peak_gflops (empty without native bf16), gemm_f32,
// gemm_bf16 and memory, its other fields left empty.
MachineProfileData measure_compute(const std::vector<int>& thread_counts, bool quick,
                                   bool progress);

// The memory-bound kernels' rates at `threads` (>= 1), as measure_compute
// measures them.
MemoryRate measure_memory_rates(int threads, bool quick);

// Each of `rate`'s rates raised to `repeat`'s where that is faster: noise
// on a shared machine only slows a memory-bound kernel.
void keep_faster(MemoryRate& rate, const MemoryRate& repeat);

}  // namespace tessel::plan
