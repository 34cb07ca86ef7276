#include "tessel/runtime/machine_peak.h"

#include <gtest/gtest.h>

#include "tessel/base/error.h"

namespace tessel {
namespace {

TEST(DataMachinePeak, MeasuresAPlausibleRate) {
  const double one = measure_fma_peak_gflops(1, 0.05);
  EXPECT_GT(one, 1.0);     // Even the scalar fallback manages this.
  EXPECT_LT(one, 1000.0);  // One core cannot exceed ~1 TFLOP/s of f32 FMA.
  EXPECT_THROW(measure_fma_peak_gflops(0), Error);
  EXPECT_THROW(measure_fma_peak_gflops(1, 0.0), Error);
}

TEST(DataMachinePeak, UsesTheWidestUnitsAtRunTime) {
  EXPECT_EQ(fma_probe_isa(), __builtin_cpu_supports("avx512f") ? "avx512f"
                             : __builtin_cpu_supports("avx2")  ? "avx2"
                                                               : "scalar");
  const std::string bf16_isa = bf16_probe_isa();
  EXPECT_EQ(bf16_isa, __builtin_cpu_supports("amx-bf16")     ? "amx_bf16"
                      : __builtin_cpu_supports("avx512bf16") ? "avx512_bf16"
                                                             : fma_probe_isa());
  const double bf16 = measure_bf16_peak_gflops(1, 0.05);
  EXPECT_GT(bf16, 1.0);
  // One core: AMX does 1024 bf16 flops a cycle, so below ~8 TFLOP/s at 5 GHz.
  EXPECT_LT(bf16, bf16_isa == "amx_bf16" ? 8000.0 : 4000.0);
  // The bf16 units are at least as fast as the f32 ones they are measured
  // against (where bf16 is emulated, they are those units).
  if (bf16_isa != fma_probe_isa()) {
    EXPECT_GT(bf16, measure_fma_peak_gflops(1, 0.05));
  }
  EXPECT_THROW(measure_bf16_peak_gflops(0), Error);
}

}  // namespace
}  // namespace tessel
