// The CUDA gate (compile/cuda_gate.h): a CPU config always passes; a CUDA
// one is refused unless TESSEL_UNVERIFIED_CUDA=1, and then only configs the
// backend has kernels and host code for pass, each refusal naming the key
// and its value. No GPU needed: the gate reads the config alone.
#include "tessel/compile/cuda_gate.h"

#include <gtest/gtest.h>

#include <functional>

namespace tessel {
namespace {

TrainConfig runnable_on_cuda() {
  TrainConfig c;
  c.device = "cuda";
  c.attention = "unfused";
  return c;
}

TEST(CudaGate, TheCpuAlwaysPasses) {
  TrainConfig c;
  c.precision = "bf16";
  c.mesh = "data=2";
  EXPECT_EQ(cuda_refusal(c, false), "");
  EXPECT_EQ(cuda_refusal(c, true), "");
}

TEST(CudaGate, CudaIsRefusedUnlessTheUnverifiedPathIsAskedFor) {
  const std::string why = cuda_refusal(runnable_on_cuda(), false);
  EXPECT_NE(why.find("device cuda: the CUDA backend has never run on a GPU"), std::string::npos)
      << why;
  EXPECT_NE(why.find("TESSEL_UNVERIFIED_CUDA=1"), std::string::npos) << why;
  EXPECT_EQ(cuda_refusal(runnable_on_cuda(), true), "");
  TrainConfig mlp = runnable_on_cuda();
  mlp.model = "mlp";
  mlp.attention = "fused";  // the MLP has no attention
  EXPECT_EQ(cuda_refusal(mlp, true), "");
}

TEST(CudaGate, WhatTheBackendCannotRunIsNamedByKey) {
  const std::vector<std::pair<std::function<void(TrainConfig&)>, std::string>> cases = {
      {[](TrainConfig& c) { c.precision = "bf16"; }, "precision bf16: bf16 einsums"},
      {[](TrainConfig& c) { c.mesh = "data=2,model=2"; }, "mesh data=2,model=2 (4 ranks)"},
      {[](TrainConfig& c) { c.microbatches = 4; }, "microbatches 4: pipelines"},
      {[](TrainConfig& c) { c.offload = "optimizer"; }, "offload optimizer"},
      {[](TrainConfig& c) { c.model = "llama"; }, "model llama: its ops (RMSNorm"},
      {[](TrainConfig& c) { c.attention = "fused"; }, "attention fused: the fused attention"},
      {[](TrainConfig& c) { c.loss = "fused"; }, "loss fused: the fused loss"},
  };
  for (const auto& [change, want] : cases) {
    TrainConfig c = runnable_on_cuda();
    change(c);
    const std::string why = cuda_refusal(c, true);
    EXPECT_EQ(why.rfind("device cuda: config ", 0), 0u) << why;
    EXPECT_NE(why.find(want), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace tessel
