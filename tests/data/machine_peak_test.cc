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

}  // namespace
}  // namespace tessel
