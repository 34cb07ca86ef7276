// The CUDA backend's kernels and their launchers (cuda_kernels.h says what
// each computes). One .cu file for all of them: nvcc is slow per file.
//
// Invariants: every kernel indexes with int64_t; elementwise kernels are
// grid-stride loops; every reduction runs in a fixed order (one thread per
// output walking its inputs in order, or a fixed shared-memory tree), never
// with atomics, so a run repeats bitwise. Compiled only: not run on a GPU.
#include <algorithm>
#include <utility>

#include "tessel/backend/cuda/cuda_check.h"
#include "tessel/backend/cuda/cuda_device.cuh"
#include "tessel/backend/cuda/cuda_kernels.h"

namespace tessel::cuda {
namespace {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items (capped: the loop covers the rest).
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 8192));
}

// Launches `kernel` on blocks_for(items) blocks of kThreads on `stream`,
// then checks the launch (naming `what`).
template <typename... Params, typename... Args>
void launch(const char* what, int64_t items, cudaStream_t stream, void (*kernel)(Params...),
            Args&&... args) {
  kernel<<<blocks_for(items), kThreads, 0, stream>>>(std::forward<Args>(args)...);
  check_launch(what);
}

#define TS_GRID_LOOP(i, n)                                                  \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{blockDim.x} * gridDim.x)

// Offset of row-major element i of `sizes` under `strides`.
__device__ int64_t strided_offset(int64_t i, const Dims& sizes, const Dims& strides, int rank) {
  int64_t off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    off += (i % sizes.v[d]) * strides.v[d];
    i /= sizes.v[d];
  }
  return off;
}

int64_t numel_of(const Dims& sizes, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= sizes.v[d];
  return n;
}

__global__ void fill_kernel(float* out, int64_t n, float value) {
  TS_GRID_LOOP(i, n) out[i] = value;
}

__global__ void scale_kernel(const float* x, float alpha, float* y, int64_t n) {
  TS_GRID_LOOP(i, n) y[i] = __fmul_rn(alpha, x[i]);
}

template <typename Out>
__global__ void binary_kernel(Binary op, const float* a, Dims sa, const float* b, Dims sb, Out* out,
                              Dims sizes, int rank, int64_t n) {
  TS_GRID_LOOP(i, n) {
    const float av = a[strided_offset(i, sizes, sa, rank)];
    const float bv = b[strided_offset(i, sizes, sb, rank)];
    float r;
    switch (op) {
      case Binary::kAdd:
        r = __fadd_rn(av, bv);
        break;
      case Binary::kSub:
        r = __fsub_rn(av, bv);
        break;
      case Binary::kMul:
        r = __fmul_rn(av, bv);
        break;
      default:
        r = __fdiv_rn(av, bv);
        break;
    }
    store_result(out + i, r);
  }
}

__global__ void expand_kernel(const float* x, Dims strides, float* out, Dims sizes, int rank,
                              int64_t n) {
  TS_GRID_LOOP(i, n) out[i] = x[strided_offset(i, sizes, strides, rank)];
}

__global__ void scatter_kernel(const float* dense, float* out, Dims strides, Dims sizes, int rank,
                               int64_t n) {
  TS_GRID_LOOP(i, n) out[strided_offset(i, sizes, strides, rank)] = dense[i];
}

__global__ void unary_kernel(Unary op, const float* x, float* y, int64_t n) {
  TS_GRID_LOOP(i, n) {
    const float v = x[i];
    switch (op) {
      case Unary::kGelu:
        y[i] = gelu_one(v);
        break;
      case Unary::kRelu:
        y[i] = v < 0.0f ? 0.0f : v;  // kernels::relu: NaN and -0 pass through
        break;
      case Unary::kExp:
        y[i] = fast_exp(v);
        break;
      case Unary::kLog:
        y[i] = fast_log(v);
        break;
      default:
        y[i] = fast_tanh(v);
        break;
    }
  }
}

__global__ void unary_grad_kernel(UnaryGrad op, const float* x, const float* dy, float* dx,
                                  int64_t n) {
  TS_GRID_LOOP(i, n) {
    const float v = x[i], g = dy[i];
    switch (op) {
      case UnaryGrad::kGelu:
        dx[i] = __fmul_rn(g, gelu_grad_one(v));
        break;
      case UnaryGrad::kRelu:
        dx[i] = v > 0.0f ? g : 0.0f;
        break;
      default:
        dx[i] = __fmul_rn(g, fmadd(-v, v, 1.0f));  // kernels::tanh_backward
        break;
    }
  }
}

template <typename Out>
__global__ void bias_gelu_kernel(const float* x, const float* bias, Out* y, int64_t cols,
                                 int64_t n) {
  TS_GRID_LOOP(i, n) store_result(y + i, gelu_one(__fadd_rn(x[i], bias[i % cols])));
}

__global__ void bias_gelu_grad_kernel(const float* x, const float* bias, const float* dy,
                                      float* dpre, int64_t cols, int64_t n) {
  TS_GRID_LOOP(i, n) dpre[i] = __fmul_rn(dy[i], gelu_grad_one(__fadd_rn(x[i], bias[i % cols])));
}

// The kept dims and the reduced dims of a reduction, each as its own
// row-major odometer; x's offset of (kept index o, reduced index r).
struct ReduceWalk {
  Dims kept_sizes, kept_strides, red_sizes, red_strides;
  int kept_rank = 0, red_rank = 0;
  int64_t kept = 1, count = 1;
};

ReduceWalk reduce_walk(const ReduceDims& dims) {
  ReduceWalk w;
  int64_t stride = 1;
  Dims x_strides;
  for (int d = dims.rank - 1; d >= 0; --d) {
    x_strides.v[d] = stride;
    stride *= dims.sizes.v[d];
  }
  for (int d = 0; d < dims.rank; ++d) {
    if (dims.reduced[d]) {
      w.red_sizes.v[w.red_rank] = dims.sizes.v[d];
      w.red_strides.v[w.red_rank++] = x_strides.v[d];
      w.count *= dims.sizes.v[d];
    } else {
      w.kept_sizes.v[w.kept_rank] = dims.sizes.v[d];
      w.kept_strides.v[w.kept_rank++] = x_strides.v[d];
      w.kept *= dims.sizes.v[d];
    }
  }
  return w;
}

// One thread per kept output, its reduced elements in row-major order.
__global__ void reduce_kernel(Reduce op, const float* x, ReduceWalk w, float* y) {
  TS_GRID_LOOP(o, w.kept) {
    const int64_t base = strided_offset(o, w.kept_sizes, w.kept_strides, w.kept_rank);
    double acc = op == Reduce::kMax ? -INFINITY : 0.0;
    for (int64_t r = 0; r < w.count; ++r) {
      const double v = x[base + strided_offset(r, w.red_sizes, w.red_strides, w.red_rank)];
      if (op == Reduce::kMax) {
        if (v != v || v > acc) acc = v;
      } else {
        acc += v;
      }
    }
    y[o] = static_cast<float>(op == Reduce::kMean ? acc / static_cast<double>(w.count) : acc);
  }
}

// The whole dy goes to the first element (row-major) equal to the max.
__global__ void reduce_max_grad_kernel(const float* x, const float* y, const float* dy,
                                       ReduceWalk w, float* dx) {
  TS_GRID_LOOP(o, w.kept) {
    const int64_t base = strided_offset(o, w.kept_sizes, w.kept_strides, w.kept_rank);
    const float m = y[o];
    bool served = false;
    for (int64_t r = 0; r < w.count; ++r) {
      const int64_t at = base + strided_offset(r, w.red_sizes, w.red_strides, w.red_rank);
      const bool is_max = x[at] == m || (m != m && x[at] != x[at]);
      dx[at] = is_max && !served ? dy[o] : 0.0f;
      served = served || is_max;
    }
  }
}

}  // namespace

void fill(float* out, int64_t n, float value, cudaStream_t stream) {
  if (n != 0) launch("fill", n, stream, fill_kernel, out, n, value);
}

void scale(const float* x, float alpha, float* y, int64_t n, cudaStream_t stream) {
  if (n != 0) launch("scale", n, stream, scale_kernel, x, alpha, y, n);
}

void binary(Binary op, const float* a, const Dims& a_strides, const float* b, const Dims& b_strides,
            void* out, bool out_bf16, const Dims& sizes, int rank, cudaStream_t stream) {
  const int64_t n = numel_of(sizes, rank);
  if (n == 0) return;
  if (out_bf16)
    launch("binary", n, stream, binary_kernel<uint16_t>, op, a, a_strides, b, b_strides,
           static_cast<uint16_t*>(out), sizes, rank, n);
  else
    launch("binary", n, stream, binary_kernel<float>, op, a, a_strides, b, b_strides,
           static_cast<float*>(out), sizes, rank, n);
}

void expand(const float* x, const Dims& x_strides, float* out, const Dims& sizes, int rank,
            cudaStream_t stream) {
  const int64_t n = numel_of(sizes, rank);
  if (n != 0) launch("expand", n, stream, expand_kernel, x, x_strides, out, sizes, rank, n);
}

void scatter(const float* dense, float* out, const Dims& out_strides, const Dims& sizes, int rank,
             cudaStream_t stream) {
  const int64_t n = numel_of(sizes, rank);
  if (n != 0) launch("scatter", n, stream, scatter_kernel, dense, out, out_strides, sizes, rank, n);
}

void unary(Unary op, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (n != 0) launch("unary", n, stream, unary_kernel, op, x, y, n);
}

void unary_grad(UnaryGrad op, const float* x, const float* dy, float* dx, int64_t n,
                cudaStream_t stream) {
  if (n != 0) launch("unary_grad", n, stream, unary_grad_kernel, op, x, dy, dx, n);
}

void bias_gelu(const float* x, const float* bias, void* y, bool out_bf16, int64_t rows,
               int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  if (out_bf16)
    launch("bias_gelu", n, stream, bias_gelu_kernel<uint16_t>, x, bias, static_cast<uint16_t*>(y),
           cols, n);
  else
    launch("bias_gelu", n, stream, bias_gelu_kernel<float>, x, bias, static_cast<float*>(y), cols,
           n);
}

void bias_gelu_grad(const float* x, const float* bias, const float* dy, float* dpre, int64_t rows,
                    int64_t cols, cudaStream_t stream) {
  const int64_t n = rows * cols;
  if (n != 0)
    launch("bias_gelu_grad", n, stream, bias_gelu_grad_kernel, x, bias, dy, dpre, cols, n);
}

void reduce(Reduce op, const float* x, const ReduceDims& dims, float* y, cudaStream_t stream) {
  const ReduceWalk w = reduce_walk(dims);
  if (w.kept != 0) launch("reduce", w.kept, stream, reduce_kernel, op, x, w, y);
}

void reduce_max_grad(const float* x, const float* y, const float* dy, const ReduceDims& dims,
                     float* dx, cudaStream_t stream) {
  const ReduceWalk w = reduce_walk(dims);
  if (w.kept != 0)
    launch("reduce_max_grad", w.kept, stream, reduce_max_grad_kernel, x, y, dy, w, dx);
}

}  // namespace tessel::cuda

#include "tessel/backend/cuda/cuda_row_kernels.cuh"
