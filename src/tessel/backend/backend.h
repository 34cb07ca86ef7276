// A backend: everything that depends on the device a program runs on.
//
// It owns memory per space (the program's arena lives in kDevice), runs one
// kernel per op kind (execute), performs the few operations the runtime
// needs between kernels (bf16 rounding, copies, gradient accumulation, the
// optimizer's update and the gradient norm), and copies across the host
// boundary (feeding a batch, reading the loss or logits, checkpoints,
// inspect, tests). Work is issued in order on one stream: a copy to the
// host returns when the data is there.
//
// Invariant: memory in MemorySpace::kDevice is dereferenced only by a
// backend (its kernels and operations) and by the communicators a program's
// collectives run on. Everything else goes through copy_to_host and
// copy_from_host. In the sanitizer build the CPU backend poisons its device
// memory outside a DeviceAccess scope, so a stray host read fails a test.
//
// Thread safety: one thread issues work to a backend at a time (the
// training thread); allocate/release and DeviceAccess are thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessel/backend/op_call.h"

namespace tessel {

enum class MemorySpace {
  kDevice,      // where kernels run: a program's arena, shared regions
  kPinnedHost,  // host memory the device copies to and from fastest
  kHost,        // ordinary host memory
};
const char* memory_space_name(MemorySpace space);

class Backend;

// Bytes of one memory space of one backend in DeviceMemory blocks: live now,
// and the most ever live at once (requested bytes, as allocation_stats).
struct SpaceStats {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
};

// An owned block of one memory space of one backend, 64-byte aligned and
// zero-initialised. Move-only; returned to its backend when destroyed. Its
// bytes count in its backend's space_stats while it lives.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(Backend* owner, MemorySpace space, uint8_t* data, size_t bytes);
  ~DeviceMemory() { reset(); }
  DeviceMemory(DeviceMemory&& other) noexcept { *this = std::move(other); }
  DeviceMemory& operator=(DeviceMemory&& other) noexcept;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return bytes_; }
  MemorySpace space() const { return space_; }
  void reset();

 private:
  Backend* owner_ = nullptr;
  MemorySpace space_ = MemorySpace::kDevice;
  uint8_t* data_ = nullptr;
  size_t bytes_ = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu" or "cuda": the value of the config key `device`.
  virtual const char* name() const = 0;

  // Memory. Throws an error naming the device, the space and the bytes when
  // the allocation cannot be had.
  virtual DeviceMemory allocate(MemorySpace space, size_t bytes) = 0;
  // What this backend's blocks of `space` hold (the measured side of the
  // memory plan's device and host figures); thread-safe.
  SpaceStats space_stats(MemorySpace space) const;

  // Kernels: runs one instruction on the kernel of its op kind.
  virtual void execute(const OpCall& call) = 0;
  // Bytes of per-instruction scratch a node's kernel needs (also in
  // plan-only programs, which run nothing) when the program runs on
  // `threads` intra-op threads (CompileOptions::threads), its products'
  // operands rounded to bf16 or not (OpCall::bf16_operands).
  virtual size_t scratch_bytes(const Graph& graph, const Node& node,
                               const kernels::EinsumPlan* einsum, int threads,
                               bool bf16_operands) const = 0;
  // The same for an all-gather that carries bf16 (OpCall::bf16_out), with
  // its input in bf16 storage (in_bf16) or f32 (rounded into scratch first),
  // and for a partial sum that carries bf16 (OpCall::bf16_sum).
  virtual size_t bf16_all_gather_scratch_bytes(const Graph& graph, const Node& node,
                                               bool in_bf16) const = 0;
  virtual size_t bf16_sum_scratch_bytes(const Graph& graph, const Node& node) const = 0;
  // Whether the kernel of `node` writes its output in bf16 itself when
  // OpCall::bf16_out is set; other producers of a bf16-stored value write
  // f32 that the program rounds afterwards (round_to_bf16).
  virtual bool writes_bf16_itself(const Node& node) const = 0;

  // Operations between kernels, on device memory.
  virtual void round_to_bf16(const float* src, uint16_t* dst, int64_t n) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void accumulate(float* dst, const float* src, int64_t n) = 0;  // dst += src
  // dst = 0 and x *= factor over n floats (a pipeline's gradient
  // accumulators between steps). Not every backend has them yet: the
  // default throws naming the backend and the operation (CUDA lacks them).
  virtual void fill_zero(float* dst, int64_t n);
  virtual void scale(float* x, int64_t n, float factor);
  // The optimizer (f32 parameters, gradients and moments): sum of squares in
  // double, in a fixed order; AdamW and SGD updates (kernels/optimizer.h).
  virtual double sum_of_squares(const float* x, int64_t n) = 0;
  virtual void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n,
                            float lr, float beta1, float beta2, float eps, float weight_decay,
                            int64_t step, float grad_scale) = 0;
  virtual void sgd_update(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                          float grad_scale) = 0;

  // The host boundary; each returns when the copy is complete.
  virtual void copy_to_host(void* host, const void* device, size_t bytes) = 0;
  virtual void copy_from_host(void* device, const void* host, size_t bytes) = 0;
  // Waits until all work issued so far is done.
  virtual void synchronize() = 0;

 protected:
  friend class DeviceMemory;
  friend class DeviceAccess;
  virtual void release(MemorySpace space, uint8_t* data, size_t bytes) = 0;
  // DeviceAccess: device memory may be dereferenced by host code between
  // open and close (nested scopes count).
  virtual void open_access() {}
  virtual void close_access() {}

 private:
  void count(MemorySpace space, int64_t bytes);  // DeviceMemory's life
  static constexpr int kSpaces = 3;
  std::atomic<int64_t> live_[kSpaces] = {}, peak_[kSpaces] = {};
};

// A scope in which the backend's device memory is reachable from this
// process's threads: a program's run (its kernels and collectives), a
// backend operation. Only backends and the runtime that drives them open one.
class DeviceAccess {
 public:
  explicit DeviceAccess(Backend& backend) : backend_(backend) { backend_.open_access(); }
  ~DeviceAccess() { backend_.close_access(); }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

 private:
  Backend& backend_;
};

// The process's CPU backend (oneDNN and Tessel's kernels).
Backend& cpu_backend();
// The backend for a config's `device` ("cpu", "cuda"): an error naming the
// device and why it is unavailable (no CUDA in this build, no GPU, no
// driver) before any compute.
// On first use of "cuda" the CUDA backend probes the GPU (built with
// TESSEL_CUDA only): "device cuda: no usable GPU (<CUDA's reason>)".
Backend& backend_for(const std::string& device);
// Device memory a backend for `device` allocates for itself, counted in its
// kDevice space_stats: CUDA's cuBLASLt workspace (kCudaGemmWorkspaceBytes);
// 0 for the CPU. Known without a GPU, for plans and dry runs.
constexpr size_t kCudaGemmWorkspaceBytes = size_t{32} << 20;  // cuBLASLt's size for Hopper
int64_t device_runtime_bytes(const std::string& device);
// Whether this build has the CUDA backend (TESSEL_CUDA found nvcc).
bool built_with_cuda();

}  // namespace tessel
