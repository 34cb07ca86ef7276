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
  const double bf16 = measure_bf16_peak_gflops(1, 0.05);
  if (bf16_probe_isa().empty()) {
    EXPECT_EQ(bf16, 0.0);  // AMX: not probed
  } else {
    EXPECT_GT(bf16, 1.0);
    EXPECT_LT(bf16, 4000.0);
  }
  EXPECT_THROW(measure_bf16_peak_gflops(0), Error);
}

}  // namespace
}  // namespace tessel
