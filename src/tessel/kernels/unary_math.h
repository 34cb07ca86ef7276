// The unary CPU kernels of the Llama family's ops (sigmoid, SiLU, square
// roots) and the gradients that are not compositions of other ops.
//
// Contiguous arrays of n f32 elements; x and y may alias. Results do not
// depend on the thread count (elementwise_map.h). Every fast kernel has a
// plain-loop `_ref` twin in double, used by the tests as the definition.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// x (n) -> y (n) = 1 / (1 + exp(-x))
void sigmoid_forward(const float* x, float* y, int64_t n);
void sigmoid_forward_ref(const float* x, float* y, int64_t n);

// y (n) = sigmoid output, dy (n) -> dx (n) = dy * y * (1 - y)
void sigmoid_backward(const float* y, const float* dy, float* dx, int64_t n);
void sigmoid_backward_ref(const float* y, const float* dy, float* dx, int64_t n);

// x (n) -> y (n) = x * sigmoid(x) (SiLU, also called swish)
void silu_forward(const float* x, float* y, int64_t n);
void silu_forward_ref(const float* x, float* y, int64_t n);

// x (n), dy (n) -> dx (n) = dy * s (1 + x (1 - s)), s = sigmoid(x)
void silu_backward(const float* x, const float* dy, float* dx, int64_t n);
void silu_backward_ref(const float* x, const float* dy, float* dx, int64_t n);

// x (n) -> y (n) = sqrt(x)
void sqrt_forward(const float* x, float* y, int64_t n);
void sqrt_forward_ref(const float* x, float* y, int64_t n);

// x (n) -> y (n) = 1 / sqrt(x)
void rsqrt_forward(const float* x, float* y, int64_t n);
void rsqrt_forward_ref(const float* x, float* y, int64_t n);

}  // namespace tessel::kernels
