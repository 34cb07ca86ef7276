// The CUDA backend: device memory from cudaMalloc, kernels from
// cuda_kernels.cu and cuBLASLt (cuda_einsum.h) through the table in
// cuda_ops.h, all issued in order on the backend's one stream; copies
// across the host boundary synchronise the stream before they return.
//
// Construction probes device 0 and throws "device cuda: no usable GPU
// (...)" naming CUDA's error when there is none. Collectives and sharded ops
// are not on CUDA yet, nor bf16 einsums: execute() refuses them
// by name. Built only with TESSEL_CUDA; compiled, never run on a GPU yet.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <mutex>

#include "tessel/backend/backend.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {
namespace cuda {
class Gemm;
}

class CudaBackend : public Backend {
 public:
  CudaBackend();  // throws tessel Error when no GPU is usable
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const char* name() const override { return "cuda"; }
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
  double sum_of_squares(const float* x, int64_t n) override;
  void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int64_t step,
                    float grad_scale) override;
  void sgd_update(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                  float grad_scale) override;

  void copy_to_host(void* host, const void* device, size_t bytes) override;
  void copy_from_host(void* device, const void* host, size_t bytes) override;
  void synchronize() override;

  cudaStream_t stream() const { return stream_; }

 protected:
  void release(MemorySpace space, uint8_t* data, size_t bytes) override;

 private:
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  DeviceMemory gemm_workspace_;  // cuBLASLt's, for every matmul
  std::unique_ptr<cuda::Gemm> gemm_;
  DeviceMemory reduce_scratch_;  // sum_of_squares: 64 chunk partials and the total
  std::mutex mutex_;
  std::map<uint8_t*, AlignedBuffer> host_blocks_;  // kHost
};

// The process's CUDA backend, constructed (and the device probed) on first
// use; a failed probe throws and is retried on the next call.
Backend& cuda_backend();

}  // namespace tessel
