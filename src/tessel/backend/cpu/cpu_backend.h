// The CPU backend: device memory is host memory (AlignedBuffer's blocks),
// kernels are Tessel's (kernels/, oneDNN for GEMMs) through the table in
// cpu_kernels.h, and the stream is the calling thread: every operation is
// complete when it returns.
//
// In the sanitizer build (AddressSanitizer), kDevice blocks are poisoned
// whenever no DeviceAccess scope is open, so host code that reads a
// program's memory without copy_to_host fails under the sanitizer as it
// would fail on a GPU. Poisoning is per backend and counts nested scopes.
#pragma once

#include <map>
#include <mutex>

#include "tessel/backend/backend.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {

class CpuBackend : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  DeviceMemory allocate(MemorySpace space, size_t bytes) override;

  void execute(const OpCall& call) override;
  size_t scratch_bytes(const Graph& graph, const Node& node, const kernels::EinsumPlan* einsum,
                       int threads, bool bf16_operands) const override;
  size_t bf16_all_gather_scratch_bytes(const Graph& graph, const Node& node,
                                       bool in_bf16) const override;
  size_t bf16_sum_scratch_bytes(const Graph& graph, const Node& node) const override;
  bool writes_bf16_itself(const Node& node) const override;

  void round_to_bf16(const float* src, uint16_t* dst, int64_t n) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void accumulate(float* dst, const float* src, int64_t n) override;
  void fill_zero(float* dst, int64_t n) override;
  void scale(float* x, int64_t n, float factor) override;
  double sum_of_squares(const float* x, int64_t n) override;
  void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t step,
                    float grad_scale) override;
  void sgd_update(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                  float grad_scale) override;

  void copy_to_host(void* host, const void* device, size_t bytes) override;
  void copy_from_host(void* device, const void* host, size_t bytes) override;
  void synchronize() override {}

  // Whether device memory is poisoned outside DeviceAccess scopes (the
  // sanitizer build).
  static bool poisons_device_memory();

 protected:
  void release(MemorySpace space, uint8_t* data, size_t bytes) override;
  void open_access() override;
  void close_access() override;

 private:
  std::mutex mutex_;
  int open_scopes_ = 0;
  struct Block {
    AlignedBuffer buffer;
    bool device;  // kDevice: poisoned while no scope is open
  };
  std::map<uint8_t*, Block> blocks_;
};

}  // namespace tessel
