// Elementwise CPU kernels: activations, unary maps, broadcasting binary ops and
// strided copies.
//
// All tensors are f32, except an `Out` output of uint16_t: the same results
// rounded to bf16 (nearest even) as they are stored, bit for bit
// round_to_bf16 of the f32 output (for values a bf16 program stores in
// bf16). Unary kernels take contiguous arrays of n elements;
// x and y may alias (in-place) unless stated otherwise. Strided kernels describe
// each operand by element strides per output dim (0 where the operand is
// broadcast along that dim) and write a contiguous row-major output. Results do
// not depend on the thread count. Every fast kernel has a plain-loop `_ref` twin
// with the same signature, used by the tests as the definition.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// Tanh-form GELU: gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// x (n) -> y (n)
void gelu(const float* x, float* y, int64_t n);
void gelu_ref(const float* x, float* y, int64_t n);

// x (n), dy (n) -> dx (n) = dy * gelu'(x)
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n);
void gelu_backward_ref(const float* x, const float* dy, float* dx, int64_t n);

// x (rows, cols), bias (cols) -> y (rows, cols) = gelu(x + bias[col])
template <typename Out>
void bias_gelu(const float* x, const float* bias, Out* y, int64_t rows, int64_t cols);
void bias_gelu_ref(const float* x, const float* bias, float* y, int64_t rows, int64_t cols);

// x (rows, cols), bias (cols), dy (rows, cols) -> dpre (rows, cols) = dy * gelu'(x + bias).
// The pre-activation x + bias is recomputed, never stored. dbias is reduce() of dpre.
void bias_gelu_backward(const float* x, const float* bias, const float* dy, float* dpre,
                        int64_t rows, int64_t cols);
void bias_gelu_backward_ref(const float* x, const float* bias, const float* dy, float* dpre,
                            int64_t rows, int64_t cols);

// x (n) -> y (n) = max(x, 0) (NaN stays NaN)
void relu(const float* x, float* y, int64_t n);
void relu_ref(const float* x, float* y, int64_t n);

// x (n), dy (n) -> dx (n) = x > 0 ? dy : 0
void relu_backward(const float* x, const float* dy, float* dx, int64_t n);
void relu_backward_ref(const float* x, const float* dy, float* dx, int64_t n);

// x (n) -> y (n) = exp(x)
void exp_forward(const float* x, float* y, int64_t n);
void exp_forward_ref(const float* x, float* y, int64_t n);

// x (n) -> y (n) = log(x)
void log_forward(const float* x, float* y, int64_t n);
void log_forward_ref(const float* x, float* y, int64_t n);

// x (n) -> y (n) = tanh(x)
void tanh_forward(const float* x, float* y, int64_t n);
void tanh_forward_ref(const float* x, float* y, int64_t n);

// y (n) = tanh output, dy (n) -> dx (n) = dy * (1 - y^2)
void tanh_backward(const float* y, const float* dy, float* dx, int64_t n);
void tanh_backward_ref(const float* y, const float* dy, float* dx, int64_t n);

// x (n) -> y (n) = alpha * x
void scale(const float* x, float alpha, float* y, int64_t n);
void scale_ref(const float* x, float alpha, float* y, int64_t n);

enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// a, b (strided views of out_sizes) -> out (out_sizes, contiguous) = a op b.
// a_strides / b_strides: element stride of each operand per out dim, 0 where the
// operand is broadcast along that dim. rank <= 16; rank 0 is a scalar. out must
// not overlap a or b unless it is exactly the same contiguous array.
// Fast paths (after merging dims both operands walk contiguously and dropping
// size-1 dims): both contiguous; b a suffix broadcast along leading dims (bias);
// otherwise an odometer over the outer dims with a simd innermost loop.
template <typename Out>
void binary(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
            const int64_t* b_strides, Out* out, const int64_t* out_sizes, int rank);
void binary_ref(BinaryOp op, const float* a, const int64_t* a_strides, const float* b,
                const int64_t* b_strides, float* out, const int64_t* out_sizes, int rank);

// x (strided view of out_sizes) -> out (out_sizes, contiguous) = x.
// One kernel for every strided copy: broadcasting (stride 0 along expanded dims)
// and permutation (x_strides = the input's strides listed in output dim order,
// e.g. a transpose of (m, n) is out_sizes (n, m), x_strides (1, n)); there is no
// separate permute kernel. out must not overlap x.
void expand(const float* x, const int64_t* x_strides, float* out, const int64_t* out_sizes,
            int rank);
void expand_ref(const float* x, const int64_t* x_strides, float* out, const int64_t* out_sizes,
                int rank);

}  // namespace tessel::kernels
