#include "tessel/kernels/elementwise.h"

#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/elementwise_map.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/max_rank.h"
#include "tessel/kernels/partition.h"

namespace tessel::kernels {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluK = 0.044715f;
constexpr double kGeluCd = 0.79788456080286535588;
constexpr double kGeluKd = 0.044715;

// gelu(x) = 0.5 x (1 + tanh(u)) = x * sigmoid(2u), u = c (x + k x^3); the sigmoid
// form needs one exp and does not cancel for negative x. exp(-2u), its argument
// capped at 87 so that e stays finite and e * s below is not inf * 0 (gelu and
// gelu' are below 1e-33 there anyway).
inline float gelu_exp(float x) {
  const float z = -2.0f * (kGeluC * fmadd(kGeluK * x, x * x, x));
  return fast_exp(z > 87.0f ? 87.0f : z);
}

inline float gelu_one(float x) { return x / (1.0f + gelu_exp(x)); }

// gelu'(x) = s + 2 x s (1 - s) c (1 + 3 k x^2), s = sigmoid(2u), 1 - s = e s.
inline float gelu_grad_one(float x) {
  const float e = gelu_exp(x);
  const float s = 1.0f / (1.0f + e);
  const float du = kGeluC * fmadd(3.0f * kGeluK * x, x, 1.0f);
  return fmadd(2.0f * x * s * (e * s), du, s);
}

// Reference: the tanh form in double. 1 + tanh(u) and 1 - tanh(u) are written as
// 2 s and 2 (1 - s) with s = 1 / (1 + exp(-2u)) (exact identities), because in
// double 1 + tanh(u) itself cancels to 0 for x below about -6.
double gelu_ref_one(double x) {
  const double u = kGeluCd * (x + kGeluKd * x * x * x);
  const double one_plus_tanh = 2.0 / (1.0 + std::exp(-2.0 * u));
  return 0.5 * x * one_plus_tanh;
}

double gelu_grad_ref_one(double x) {
  const double u = kGeluCd * (x + kGeluKd * x * x * x);
  const double one_plus_tanh = 2.0 / (1.0 + std::exp(-2.0 * u));
  const double one_minus_tanh = 2.0 / (1.0 + std::exp(2.0 * u));
  const double du = kGeluCd * (1.0 + 3.0 * kGeluKd * x * x);
  return 0.5 * one_plus_tanh + 0.5 * x * one_minus_tanh * one_plus_tanh * du;
}

// ---- strided iteration ---------------------------------------------------

// An iteration space after dropping size-1 dims and merging neighbouring dims
// that every operand walks as one (stride[d] == stride[d+1] * size[d+1]).
// The output stays contiguous row-major over `sizes`. rank >= 1 unless numel == 0.
struct Collapsed {
  int rank = 0;
  int64_t numel = 1;
  int64_t sizes[kMaxRank];
  int64_t strides[2][kMaxRank];
};

Collapsed collapse(const int64_t* sizes, int rank, int operands, const int64_t* const* strides) {
  TS_CHECK(rank >= 0 && rank <= kMaxRank, "rank ", rank, " outside [0, ", kMaxRank, "]");
  Collapsed c;
  for (int d = 0; d < rank; ++d) {
    TS_CHECK(sizes[d] >= 0, "negative size ", sizes[d], " at dim ", d);
    c.numel *= sizes[d];
  }
  if (c.numel == 0) return c;
  for (int d = 0; d < rank; ++d) {
    if (sizes[d] == 1) continue;
    bool merge = c.rank > 0;
    for (int k = 0; k < operands && merge; ++k)
      merge = c.strides[k][c.rank - 1] == strides[k][d] * sizes[d];
    if (merge) {
      c.sizes[c.rank - 1] *= sizes[d];
      for (int k = 0; k < operands; ++k) c.strides[k][c.rank - 1] = strides[k][d];
    } else {
      c.sizes[c.rank] = sizes[d];
      for (int k = 0; k < operands; ++k) c.strides[k][c.rank] = strides[k][d];
      ++c.rank;
    }
  }
  if (c.rank == 0) {
    c.rank = 1;
    c.sizes[0] = 1;
    for (int k = 0; k < operands; ++k) c.strides[k][0] = 0;
  }
  return c;
}

// Calls row(out_row, offset0, offset1) for every row of the collapsed space (a row is
// the innermost dim), rows split statically across threads; offsets are element
// offsets of the operands at the row start.
template <typename RowFn>
void for_each_row(const Collapsed& c, int operands, RowFn row) {
  const int outer_rank = c.rank - 1;
  int64_t rows = 1;
  for (int d = 0; d < outer_rank; ++d) rows *= c.sizes[d];
#pragma omp parallel if (c.numel > kParallelGrain && rows > 1)
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t begin = chunk_begin(thread, threads, rows);
    const int64_t end = chunk_begin(thread + 1, threads, rows);
    if (begin < end) {
      int64_t index[kMaxRank];
      int64_t offset[2] = {0, 0};
      int64_t rest = begin;
      for (int d = outer_rank - 1; d >= 0; --d) {
        index[d] = rest % c.sizes[d];
        rest /= c.sizes[d];
        for (int k = 0; k < operands; ++k) offset[k] += index[d] * c.strides[k][d];
      }
      for (int64_t r = begin; r < end; ++r) {
        row(r, offset[0], offset[1]);
        for (int d = outer_rank - 1; d >= 0; --d) {
          for (int k = 0; k < operands; ++k) offset[k] += c.strides[k][d];
          if (++index[d] < c.sizes[d]) break;
          for (int k = 0; k < operands; ++k) offset[k] -= index[d] * c.strides[k][d];
          index[d] = 0;
        }
      }
    }
  }
}

// out (n) = a[i * sa] op b[i * sb], specialised on the common stride patterns.
template <typename Op, typename Out>
inline void binary_row(Op op, const float* a, int64_t sa, const float* b, int64_t sb, Out* out,
                       int64_t n) {
  if (sa == 1 && sb == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_result(out + i, op(a[i], b[i]));
  } else if (sa == 1 && sb == 0) {
    const float bv = *b;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_result(out + i, op(a[i], bv));
  } else if (sa == 0 && sb == 1) {
    const float av = *a;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_result(out + i, op(av, b[i]));
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) store_result(out + i, op(a[i * sa], b[i * sb]));
  }
}

template <typename Op, typename Out>
void binary_impl(Op op, const float* a, const int64_t* a_strides, const float* b,
                 const int64_t* b_strides, Out* out, const int64_t* out_sizes, int rank) {
  const int64_t* strides[2] = {a_strides, b_strides};
  const Collapsed c = collapse(out_sizes, rank, 2, strides);
  if (c.numel == 0) return;
  const int64_t inner = c.sizes[c.rank - 1];
  const int64_t sa = c.strides[0][c.rank - 1], sb = c.strides[1][c.rank - 1];
  if (c.rank == 1 && sa == 1 && sb == 1) {
    // Both contiguous, same shape.
    const int64_t n = c.numel;
#pragma omp parallel for simd schedule(simd : static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) store_result(out + i, op(a[i], b[i]));
  } else if (c.rank == 2 && sa == 1 && sb == 1 && c.strides[0][0] == inner &&
             c.strides[1][0] == 0) {
    // b is a suffix of a, broadcast along the leading dims (e.g. a bias).
    const int64_t rows = c.sizes[0];
#pragma omp parallel for schedule(static) if (c.numel > kParallelGrain)
    for (int64_t r = 0; r < rows; ++r) {
      const float* ar = a + r * inner;
      Out* outr = out + r * inner;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) store_result(outr + i, op(ar[i], b[i]));
    }
  } else {
    for_each_row(c, 2, [&](int64_t r, int64_t oa, int64_t ob) {
      binary_row(op, a + oa, sa, b + ob, sb, out + r * inner, inner);
    });
  }
}

}  // namespace

// ---- activations -----------------------------------------------------------

void gelu(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return gelu_one(v); });
}

void gelu_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(gelu_ref_one(x[i]));
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  map2(x, dy, dx, n, [](float xv, float g) { return g * gelu_grad_one(xv); });
}

void gelu_backward_ref(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<float>(dy[i] * gelu_grad_ref_one(x[i]));
}

template <typename Out>
void bias_gelu(const float* x, const float* bias, Out* y, int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    Out* yr = y + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) store_result(yr + c, gelu_one(xr[c] + bias[c]));
  }
}
template void bias_gelu(const float*, const float*, float*, int64_t, int64_t);
template void bias_gelu(const float*, const float*, uint16_t*, int64_t, int64_t);

void bias_gelu_ref(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float pre = x[r * cols + c] + bias[c];
      y[r * cols + c] = static_cast<float>(gelu_ref_one(pre));
    }
  }
}

void bias_gelu_backward(const float* x, const float* bias, const float* dy, float* dpre,
                        int64_t rows, int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    float* dr = dpre + r * cols;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) dr[c] = dyr[c] * gelu_grad_one(xr[c] + bias[c]);
  }
}

void bias_gelu_backward_ref(const float* x, const float* bias, const float* dy, float* dpre,
                            int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const float pre = x[r * cols + c] + bias[c];
      dpre[r * cols + c] = static_cast<float>(dy[r * cols + c] * gelu_grad_ref_one(pre));
    }
  }
}

void relu(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return v < 0.0f ? 0.0f : v; });
}

void relu_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::isnan(x[i]) ? x[i] : (x[i] > 0.0f ? x[i] : 0.0f);
}

void relu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  map2(x, dy, dx, n, [](float xv, float g) { return xv > 0.0f ? g : 0.0f; });
}

void relu_backward_ref(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

void exp_forward(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return fast_exp(v); });
}

void exp_forward_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::exp(static_cast<double>(x[i])));
}

void log_forward(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return fast_log(v); });
}

void log_forward_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::log(static_cast<double>(x[i])));
}

void tanh_forward(const float* x, float* y, int64_t n) {
  map1(x, y, n, [](float v) { return fast_tanh(v); });
}

void tanh_forward_ref(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(std::tanh(static_cast<double>(x[i])));
}

void tanh_backward(const float* y, const float* dy, float* dx, int64_t n) {
  map2(y, dy, dx, n, [](float yv, float g) { return g * fmadd(-yv, yv, 1.0f); });
}

void tanh_backward_ref(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double yv = y[i];
    dx[i] = static_cast<float>(dy[i] * (1.0 - yv * yv));
  }
}

void scale(const float* x, float alpha, float* y, int64_t n) {
  map1(x, y, n, [alpha](float v) { return alpha * v; });
}

void scale_ref(const float* x, float alpha, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}

// ---- broadcasting and strided copies -----------------------------------------

template <typename Out>
void binary(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
            const int64_t* b_strides, Out* out, const int64_t* out_sizes, int rank) {
  switch (op) {
    case BinaryOp::kAdd:
      return binary_impl(std::plus<float>{}, a, a_strides, b, b_strides, out, out_sizes, rank);
    case BinaryOp::kSub:
      return binary_impl(std::minus<float>{}, a, a_strides, b, b_strides, out, out_sizes, rank);
    case BinaryOp::kMul:
      return binary_impl(std::multiplies<float>{}, a, a_strides, b, b_strides, out, out_sizes,
                         rank);
    case BinaryOp::kDiv:
      return binary_impl(std::divides<float>{}, a, a_strides, b, b_strides, out, out_sizes, rank);
  }
  TS_CHECK(false, "unknown BinaryOp ", static_cast<int>(op));
}
template void binary(BinaryOp, const float*, const int64_t*, const float*, const int64_t*, float*,
                     const int64_t*, int);
template void binary(BinaryOp, const float*, const int64_t*, const float*, const int64_t*,
                     uint16_t*, const int64_t*, int);

namespace {

// The reference twins' walk: element i of a row-major `sizes` space at its
// offset under `strides`.
int64_t strided_offset(int64_t i, const int64_t* sizes, const int64_t* strides, int rank) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return offset;
}

int64_t numel_of(const int64_t* sizes, int rank) {
  int64_t numel = 1;
  for (int d = 0; d < rank; ++d) numel *= sizes[d];
  return numel;
}

}  // namespace

void binary_ref(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
                const int64_t* b_strides, float* out, const int64_t* out_sizes, int rank) {
  const int64_t numel = numel_of(out_sizes, rank);
  for (int64_t i = 0; i < numel; ++i) {
    const float av = a[strided_offset(i, out_sizes, a_strides, rank)];
    const float bv = b[strided_offset(i, out_sizes, b_strides, rank)];
    out[i] = op == BinaryOp::kAdd   ? av + bv
             : op == BinaryOp::kSub ? av - bv
             : op == BinaryOp::kMul ? av * bv
                                    : av / bv;
  }
}

void expand(const float* x, const int64_t* x_strides, float* out, const int64_t* out_sizes,
            int rank) {
  const int64_t* strides[1] = {x_strides};
  const Collapsed c = collapse(out_sizes, rank, 1, strides);
  if (c.numel == 0) return;
  const int64_t inner = c.sizes[c.rank - 1];
  const int64_t sx = c.strides[0][c.rank - 1];
  if (c.rank == 1 && sx == 1) {
    const int64_t n = c.numel;
#pragma omp parallel for simd schedule(simd : static) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) out[i] = x[i];
    return;
  }
  for_each_row(c, 1, [&](int64_t r, int64_t ox, int64_t) {
    const float* xr = x + ox;
    float* outr = out + r * inner;
    if (sx == 1) {
      std::memcpy(outr, xr, static_cast<size_t>(inner) * sizeof(float));
    } else if (sx == 0) {
      const float v = *xr;
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) outr[i] = v;
    } else {
#pragma omp simd
      for (int64_t i = 0; i < inner; ++i) outr[i] = xr[i * sx];
    }
  });
}

void expand_ref(const float* x, const int64_t* x_strides, float* out, const int64_t* out_sizes,
                int rank) {
  const int64_t numel = numel_of(out_sizes, rank);
  for (int64_t i = 0; i < numel; ++i) out[i] = x[strided_offset(i, out_sizes, x_strides, rank)];
}

}  // namespace tessel::kernels
