// The CUDA backend (cuda_backend.h). Compiled only: not run on a GPU yet.
#include "tessel/backend/cuda/cuda_backend.h"

#include <cstring>
#include <new>

#include "tessel/backend/cuda/cuda_check.h"
#include "tessel/backend/cuda/cuda_einsum.h"
#include "tessel/backend/cuda/cuda_kernels.h"
#include "tessel/backend/cuda/cuda_ops.h"
#include "tessel/base/error.h"
#include "tessel/kernels/optimizer.h"

namespace tessel {
namespace cuda {

void check_cuda(cudaError_t status, const char* call) {
  if (status != cudaSuccess)
    TS_THROW("device cuda: ", call, " failed: ", cudaGetErrorString(status), " (",
             cudaGetErrorName(status), ")");
}

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    TS_THROW("device cuda: ", call, " failed: ", cublasLtGetStatusString(status), " (",
             cublasLtGetStatusName(status), ")");
}

void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    TS_THROW("device cuda: kernel ", kernel, " failed to launch: ", cudaGetErrorString(status));
}

}  // namespace cuda

namespace {

// Device 0's name, or "no usable GPU" naming CUDA's reason.
std::string probe_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess)
    TS_THROW("device cuda: no usable GPU (cudaGetDeviceCount: ", cudaGetErrorString(status), ")");
  if (count == 0) TS_THROW("device cuda: no usable GPU (cudaGetDeviceCount found no devices)");
  const cudaError_t set = cudaSetDevice(0);
  if (set != cudaSuccess)
    TS_THROW("device cuda: no usable GPU (cudaSetDevice(0): ", cudaGetErrorString(set), ")");
  cudaDeviceProp prop{};
  TS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.name;
}

}  // namespace

CudaBackend::CudaBackend() {
  device_name_ = probe_device();
  TS_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  DeviceMemory workspace = allocate(MemorySpace::kDevice, kCudaGemmWorkspaceBytes);
  reduce_scratch_ = allocate(MemorySpace::kDevice, 65 * sizeof(double));
  gemm_ = std::make_unique<cuda::Gemm>(workspace.data(), workspace.size());
  gemm_workspace_ = std::move(workspace);
}

CudaBackend::~CudaBackend() {
  // Errors are ignored here: at process exit the runtime may be gone.
  if (stream_) cudaStreamSynchronize(stream_);
  gemm_.reset();
  gemm_workspace_.reset();
  reduce_scratch_.reset();
  if (stream_) cudaStreamDestroy(stream_);
}

DeviceMemory CudaBackend::allocate(MemorySpace space, size_t bytes) {
  if (bytes == 0) return DeviceMemory(this, space, nullptr, 0);
  void* data = nullptr;
  if (space == MemorySpace::kHost) {
    AlignedBuffer buffer;
    try {
      buffer = AlignedBuffer(bytes);
    } catch (const std::bad_alloc&) {
      TS_THROW("device cuda: cannot allocate ", bytes, " bytes of host memory");
    }
    uint8_t* p = buffer.data();
    std::lock_guard<std::mutex> lock(mutex_);
    host_blocks_.emplace(p, std::move(buffer));
    return DeviceMemory(this, space, p, bytes);
  }
  const cudaError_t status =
      space == MemorySpace::kDevice ? cudaMalloc(&data, bytes) : cudaMallocHost(&data, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state for the next call
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    TS_THROW("device cuda (", device_name_, "): cannot allocate ", bytes, " bytes of ",
             memory_space_name(space), " memory: ", cudaGetErrorString(status), " (", free_bytes,
             " of ", total_bytes, " bytes of GPU memory free)");
  }
  if (space == MemorySpace::kDevice) {
    TS_CUDA_CHECK(cudaMemsetAsync(data, 0, bytes, stream_));
    TS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  } else {
    std::memset(data, 0, bytes);
  }
  return DeviceMemory(this, space, static_cast<uint8_t*>(data), bytes);
}

void CudaBackend::release(MemorySpace space, uint8_t* data, size_t bytes) {
  if (space == MemorySpace::kHost) {
    AlignedBuffer freed;  // destroyed after the lock is released
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = host_blocks_.find(data);
    TS_CHECK(it != host_blocks_.end(), "device cuda: releasing a block it did not allocate");
    freed = std::move(it->second);
    host_blocks_.erase(it);
    return;
  }
  // Work in flight may still use the block; errors are ignored (release
  // runs in destructors).
  cudaStreamSynchronize(stream_);
  if (space == MemorySpace::kDevice)
    cudaFree(data);
  else
    cudaFreeHost(data);
}

void CudaBackend::execute(const OpCall& call) {
  execute_cuda_kernel(call, CudaContext{stream_, *gemm_});
}

size_t CudaBackend::scratch_bytes(const Graph& graph, const Node& node,
                                  const kernels::EinsumPlan* einsum, int /*threads*/,
                                  bool /*bf16_operands*/) const {
  return cuda_scratch_bytes(graph, node, einsum);
}

// Collectives are not on CUDA yet: they need no scratch here.
size_t CudaBackend::bf16_all_gather_scratch_bytes(const Graph&, const Node&, bool) const {
  return 0;
}
size_t CudaBackend::bf16_sum_scratch_bytes(const Graph&, const Node&) const { return 0; }

bool CudaBackend::writes_bf16_itself(const Node& node) const {
  return cuda_writes_bf16_itself(node);
}

void CudaBackend::round_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  cuda::round_to_bf16(src, dst, n, stream_);
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes) TS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
}

void CudaBackend::accumulate(float* dst, const float* src, int64_t n) {
  cuda::accumulate(dst, src, n, stream_);
}

double CudaBackend::sum_of_squares(const float* x, int64_t n) {
  auto* partials = reinterpret_cast<double*>(reduce_scratch_.data());
  cuda::sum_of_squares(x, n, partials, partials + 64, stream_);
  double total = 0.0;
  copy_to_host(&total, partials + 64, sizeof(double));
  return total;
}

// kernels::adamw_update's scalars, computed on the host by the CPU's code.
void CudaBackend::adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                               float lr, float beta1, float beta2, float eps, float weight_decay,
                               int64_t step, float grad_scale) {
  const kernels::AdamWScalars s = kernels::adamw_scalars(lr, beta1, beta2, weight_decay, step);
  cuda::adamw_update(param, grad, m, v, n, s.step_size, s.inv_sqrt_bc2, s.decay, beta1, beta2, eps,
                     grad_scale, stream_);
}

void CudaBackend::sgd_update(float* param, const float* grad, int64_t n, float lr,
                             float weight_decay, float grad_scale) {
  cuda::sgd_update(param, grad, n, lr, weight_decay, grad_scale, stream_);
}

void CudaBackend::copy_to_host(void* host, const void* device, size_t bytes) {
  if (bytes) TS_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDefault, stream_));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_from_host(void* device, const void* host, size_t bytes) {
  if (bytes) TS_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyDefault, stream_));
  TS_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::synchronize() { TS_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Backend& cuda_backend() {
  static CudaBackend backend;  // a throwing probe leaves it unconstructed: retried next call
  return backend;
}

}  // namespace tessel
