// The CUDA backend's kernels as plain C++ calls (launchers), defined in
// cuda_kernels.cu and called by the kernel table (cuda_ops.cc) and the
// backend's operations (cuda_backend.cc).
//
// Each computes what the CPU kernel of the same name computes (kernels/*.h):
// same formulas, same layouts (contiguous row-major outputs, operands given
// by element strides per output dim, 0 where broadcast). Every launch is
// asynchronous on `stream`. Determinism: no atomics; every reduction walks
// its elements in one fixed order (one thread per output, or a fixed tree
// within a block), so results repeat bitwise on one GPU. Row reductions
// (softmax, LayerNorm, cross-entropy, reduce) accumulate in double, as the
// CPU kernels' `_ref` twins do. Compiled only: nothing here has run on a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tessel::cuda {

constexpr int kMaxRank = 8;  // as the CPU kernel table's limit
struct Dims {
  int64_t v[kMaxRank] = {};
};

void fill(float* out, int64_t n, float value, cudaStream_t stream);
void scale(const float* x, float alpha, float* y, int64_t n, cudaStream_t stream);
// a op b, broadcast by strides; out f32, or bf16 (rounded) when out_bf16.
enum class Binary { kAdd, kSub, kMul, kDiv };
void binary(Binary op, const float* a, const Dims& a_strides, const float* b, const Dims& b_strides,
            void* out, bool out_bf16, const Dims& sizes, int rank, cudaStream_t stream);
// out (sizes, contiguous) = x read at strides (kernels::expand).
void expand(const float* x, const Dims& x_strides, float* out, const Dims& sizes, int rank,
            cudaStream_t stream);
// The inverse: dense (sizes, contiguous) written to out at strides.
void scatter(const float* dense, float* out, const Dims& out_strides, const Dims& sizes, int rank,
             cudaStream_t stream);

enum class Unary { kGelu, kRelu, kExp, kLog, kTanh };
void unary(Unary op, const float* x, float* y, int64_t n, cudaStream_t stream);
// (x or y, dy) -> dx: gelu'(x) dy, x > 0 ? dy : 0, dy (1 - y^2).
enum class UnaryGrad { kGelu, kRelu, kTanh };
void unary_grad(UnaryGrad op, const float* x, const float* dy, float* dx, int64_t n,
                cudaStream_t stream);
void bias_gelu(const float* x, const float* bias, void* y, bool out_bf16, int64_t rows,
               int64_t cols, cudaStream_t stream);
void bias_gelu_grad(const float* x, const float* bias, const float* dy, float* dpre, int64_t rows,
                    int64_t cols, cudaStream_t stream);

// kernels::reduce over the dims marked in `reduced` (0 kept, 1 reduced).
enum class Reduce { kSum, kMean, kMax };
struct ReduceDims {
  Dims sizes;
  int reduced[kMaxRank] = {};
  int rank = 0;
};
void reduce(Reduce op, const float* x, const ReduceDims& dims, float* y, cudaStream_t stream);
void reduce_max_grad(const float* x, const float* y, const float* dy, const ReduceDims& dims,
                     float* dx, cudaStream_t stream);

// Softmax of scale * x along n of (outer, n, inner); causal when
// query_size > 0 (then inner == 1; kernels/softmax.h's CausalMask).
void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, float scale,
             int64_t query_size, int64_t query_stride, cudaStream_t stream);
void softmax_grad(const float* y, const float* dy, void* dx, bool out_bf16, int64_t outer,
                  int64_t n, int64_t inner, float scale, cudaStream_t stream);

void layernorm(const float* x, const float* gamma, const float* beta, void* y, bool out_bf16,
               int64_t rows, int64_t cols, float eps, cudaStream_t stream);
void layernorm_grad_input(const float* x, const float* gamma, const float* dy, float* dx,
                          int64_t rows, int64_t cols, float eps, cudaStream_t stream);
// `stats` holds layernorm_grad_params_scratch(rows) bytes (each row's mean
// and 1/std, computed once).
size_t layernorm_grad_params_scratch(int64_t rows);
void layernorm_grad_params(const float* x, const float* dy, float* dgamma, float* dbeta,
                           void* stats, int64_t rows, int64_t cols, float eps, cudaStream_t stream);

// Ids and labels are range-checked where data enters (Engine::check_input_ids),
// not by throwing on the device: an id outside the table gives NaN rows, a
// label outside the classes a NaN loss and gradient row.
void embedding(const float* table, const int32_t* ids, float* out, int64_t n, int64_t vocab,
               int64_t dim, cudaStream_t stream);
void embedding_grad(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t vocab,
                    int64_t dim, cudaStream_t stream);
// The mean over rows; `row_loss` is `rows` doubles of scratch.
void cross_entropy(const float* logits, const int32_t* labels, float* loss, double* row_loss,
                   int64_t rows, int64_t vocab, cudaStream_t stream);
void cross_entropy_grad(const float* logits, const int32_t* labels, const float* dloss,
                        float* dlogits, int64_t rows, int64_t vocab, cudaStream_t stream);

// Dropout (kernels::dropout, backend/cpu/dropout_op.cc): element e's counter
// is base + sum over dims of (coord + offset) * stride; key from the host.
struct DropoutArgs {
  Dims sizes, offsets, strides;
  int rank = 0;
  int64_t base = 0;
  float p = 0, keep_scale = 0;
  uint32_t k0 = 0, k1 = 0, salt = 0, lane = 0;
};
void dropout(const float* x, float* y, const DropoutArgs& args, cudaStream_t stream);

void round_to_bf16(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream);
void accumulate(float* dst, const float* src, int64_t n, cudaStream_t stream);
// Sum of squares in double: kernels::sum_of_squares's chunks (num_chunks(n,
// 2^15), at most 64), each summed by one block in a fixed tree, then the
// chunks in order into *result (device). `partials` holds 64 doubles.
void sum_of_squares(const float* x, int64_t n, double* partials, double* result,
                    cudaStream_t stream);
void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, float step_size,
                  float inv_sqrt_bc2, float decay, float beta1, float beta2, float eps,
                  float grad_scale, cudaStream_t stream);
void sgd_update(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                float grad_scale, cudaStream_t stream);

}  // namespace tessel::cuda
