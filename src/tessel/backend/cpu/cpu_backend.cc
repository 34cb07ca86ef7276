#include "tessel/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "tessel/backend/cpu/cpu_kernels.h"
#include "tessel/backend/cpu/sharded_ops.h"
#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/optimizer.h"
#include "tessel/tensor/aligned_buffer.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define TS_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define TS_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#define TS_POISONS 1
#else
#define TS_POISON(p, n) ((void)(p), (void)(n))
#define TS_UNPOISON(p, n) ((void)(p), (void)(n))
#define TS_POISONS 0
#endif

namespace tessel {

bool CpuBackend::poisons_device_memory() { return TS_POISONS; }

// Every space is an AlignedBuffer's block (counted in allocation_stats):
// host memory is all the CPU has. The backend keeps the buffer until
// release().
DeviceMemory CpuBackend::allocate(MemorySpace space, size_t bytes) {
  if (bytes == 0) return DeviceMemory(this, space, nullptr, 0);
  AlignedBuffer buffer;
  try {
    buffer = AlignedBuffer(bytes);
  } catch (const std::bad_alloc&) {
    TS_THROW("device cpu: cannot allocate ", bytes, " bytes of ", memory_space_name(space),
             " memory");
  }
  uint8_t* data = buffer.data();
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_.emplace(data, Block{std::move(buffer), space == MemorySpace::kDevice});
  if (space == MemorySpace::kDevice && open_scopes_ == 0) TS_POISON(data, bytes);
  return DeviceMemory(this, space, data, bytes);
}

void CpuBackend::release(MemorySpace, uint8_t* data, size_t bytes) {
  AlignedBuffer freed;  // destroyed after the lock is released
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(data);
  TS_CHECK(it != blocks_.end(), "device cpu: releasing a block it did not allocate");
  TS_UNPOISON(data, bytes);
  freed = std::move(it->second.buffer);
  blocks_.erase(it);
}

// Outside the sanitizer build the scopes are only counted: the walk over
// every block (arenas and each parameter's and moment's) is skipped.
void CpuBackend::open_access() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_scopes_++ == 0 && TS_POISONS)
    for (auto& [data, block] : blocks_)
      if (block.device) TS_UNPOISON(data, block.buffer.size());
}

void CpuBackend::close_access() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (--open_scopes_ == 0 && TS_POISONS)
    for (auto& [data, block] : blocks_)
      if (block.device) TS_POISON(data, block.buffer.size());
}

void CpuBackend::execute(const OpCall& call) { execute_cpu_kernel(call); }

size_t CpuBackend::scratch_bytes(const Graph& graph, const Node& node,
                                 const kernels::EinsumPlan* einsum, int threads,
                                 bool bf16_operands) const {
  return cpu_scratch_bytes(graph, node, einsum, threads, bf16_operands);
}

size_t CpuBackend::bf16_all_gather_scratch_bytes(const Graph& graph, const Node& node,
                                                 bool in_bf16) const {
  return tessel::bf16_all_gather_scratch_bytes(graph, node, in_bf16);
}

size_t CpuBackend::bf16_sum_scratch_bytes(const Graph& graph, const Node& node) const {
  return tessel::bf16_sum_scratch_bytes(graph, node);
}

bool CpuBackend::writes_bf16_itself(const Node& node) const { return cpu_writes_bf16_itself(node); }

void CpuBackend::round_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  DeviceAccess access(*this);
  tessel::round_to_bf16(src, dst, n);
}

void CpuBackend::copy(void* dst, const void* src, size_t bytes) {
  DeviceAccess access(*this);
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::accumulate(float* dst, const float* src, int64_t n) {
  DeviceAccess access(*this);
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

void CpuBackend::fill_zero(float* dst, int64_t n) {
  DeviceAccess access(*this);
  std::fill(dst, dst + n, 0.0f);
}

void CpuBackend::scale(float* x, int64_t n, float factor) {
  DeviceAccess access(*this);
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

double CpuBackend::sum_of_squares(const float* x, int64_t n) {
  DeviceAccess access(*this);
  return kernels::sum_of_squares(x, n);
}

void CpuBackend::adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                              float lr, float beta1, float beta2, float eps, float weight_decay,
                              int64_t step, float grad_scale) {
  DeviceAccess access(*this);
  kernels::adamw_update(param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, step,
                        grad_scale);
}

void CpuBackend::sgd_update(float* param, const float* grad, int64_t n, float lr,
                            float weight_decay, float grad_scale) {
  DeviceAccess access(*this);
  kernels::sgd_update(param, grad, n, lr, weight_decay, grad_scale);
}

void CpuBackend::copy_to_host(void* host, const void* device, size_t bytes) {
  copy(host, device, bytes);
}

void CpuBackend::copy_from_host(void* device, const void* host, size_t bytes) {
  copy(device, host, bytes);
}

}  // namespace tessel
