// Model state (parameters, AdamW moments) lives in the backend's device
// memory: host code reaches it only by copies. In the sanitizer build the
// CPU backend poisons it outside the backend, so a stray host read dies.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "common/tiny_gpt.h"
#include "tessel/backend/cpu/cpu_backend.h"
#include "tessel/train/trainer.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace tessel {
namespace {

// A trainer's parameters and moments are the backend's device memory, and
// the copies across the boundary are exact.
TEST(ModelState, ParametersAndMomentsAreDeviceMemoryReachedByCopies) {
  TrainConfig c = tiny_gpt_config(1, 2);
  c.steps = 2;
  Trainer trainer(c);
  trainer.step();
  ParamEntry& e = trainer.params().at("wte");
  EXPECT_EQ(&e.value.backend(), &cpu_backend());
  EXPECT_EQ(&e.m.backend(), &cpu_backend());
  ASSERT_EQ(e.m.numel(), e.value.numel());  // AdamW's moments were made on the first step
  std::vector<float> w = e.value.to_host();
  ASSERT_EQ(static_cast<int64_t>(w.size()), e.value.numel());
  w[0] += 1.0f;
  e.value.write(w.data());
  EXPECT_EQ(e.value.to_host(), w);
}

TEST(ModelState, ParametersAndMomentsArePoisonedOutsideTheBackend) {
  if (!CpuBackend::poisons_device_memory())
    GTEST_SKIP() << "device memory is poisoned only in the sanitizer build (build-asan/)";
#if defined(__SANITIZE_ADDRESS__)
  TrainConfig c = tiny_gpt_config(1, 2);
  c.steps = 2;
  Trainer trainer(c);
  trainer.step();  // the moments exist after the first update
  const ParamEntry& e = trainer.params().at("wte");
  const float* value = e.value.device_f32();
  EXPECT_TRUE(__asan_address_is_poisoned(value));
  EXPECT_TRUE(__asan_address_is_poisoned(e.m.device_f32()));
  EXPECT_TRUE(__asan_address_is_poisoned(e.v.device_f32()));
  {
    DeviceAccess access(cpu_backend());
    EXPECT_FALSE(__asan_address_is_poisoned(value));
  }
  EXPECT_TRUE(__asan_address_is_poisoned(value));
  EXPECT_EQ(e.value.to_host().size(), static_cast<size_t>(e.value.numel()));  // a copy is fine
  EXPECT_DEATH(
      {
        float x;
        std::memcpy(&x, value, sizeof(x));  // a stray host read of a parameter
        std::printf("%f\n", x);
      },
      "use-after-poison");
#endif
}

}  // namespace
}  // namespace tessel
