// The CUDA kernel table (cuda_ops.h). Compiled only: not run on a GPU yet.
#include "tessel/backend/cuda/cuda_ops.h"

#include <algorithm>

#include "tessel/backend/cpu/cpu_kernels.h"
#include "tessel/backend/cpu/dropout_op.h"
#include "tessel/backend/cpu/sharded_ops.h"
#include "tessel/backend/cuda/cuda_einsum.h"
#include "tessel/backend/cuda/cuda_kernels.h"
#include "tessel/base/around.h"
#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/ir/attrs.h"
#include "tessel/ir/op_table.h"

namespace tessel {
namespace {

using cuda::Dims;
static_assert(cuda::kMaxRank == kMaxKernelRank, "the CUDA kernels take the CPU table's arrays");

// The kernel table's arrays (cpu_kernels.h's strides_over, sizes_of) as a launcher's Dims.
Dims to_dims(const DimArray& a) {
  Dims d;
  std::copy(a.begin(), a.end(), d.v);
  return d;
}

cuda::ReduceDims reduce_dims(const Shape& x, const std::vector<std::string>& dims) {
  cuda::ReduceDims r{to_dims(sizes_of(x)), {}, x.rank()};
  for (int i = 0; i < x.rank(); ++i)
    r.reduced[i] = std::find(dims.begin(), dims.end(), x[i].name) != dims.end();
  return r;
}

void binary(const OpCall& call, cuda::Binary op, cudaStream_t stream) {
  const Shape& out = call.node.shape;
  cuda::binary(op, in_f32(call, 0), to_dims(strides_over(in_shape(call, 0), out)), in_f32(call, 1),
               to_dims(strides_over(in_shape(call, 1), out)), call.out, call.bf16_out,
               to_dims(sizes_of(out)), out.rank(), stream);
}

// One function per op kind, for the table below.
void fill(const OpCall& c, const CudaContext& x) {
  cuda::fill(out_f32(c), c.node.shape.numel(), fill_value(c.node.attrs), x.stream);
}

void einsum(const OpCall& c, const CudaContext& x) {
  if (c.einsum_bf16)
    TS_THROW("einsum '", c.node.name,
             "': bf16 not on CUDA yet (precision bf16 einsums run on the CPU backend only)");
  TS_CHECK(c.einsum, "einsum '", c.node.name, "' has no plan");
  x.gemm.einsum(*c.einsum, in_f32(c, 0), in_f32(c, 1), out_f32(c), static_cast<float*>(c.scratch),
                x.stream);
}

void add(const OpCall& c, const CudaContext& x) { binary(c, cuda::Binary::kAdd, x.stream); }
void sub(const OpCall& c, const CudaContext& x) { binary(c, cuda::Binary::kSub, x.stream); }
void mul(const OpCall& c, const CudaContext& x) { binary(c, cuda::Binary::kMul, x.stream); }
void div(const OpCall& c, const CudaContext& x) { binary(c, cuda::Binary::kDiv, x.stream); }

void scale(const OpCall& c, const CudaContext& x) {
  cuda::scale(in_f32(c, 0), scale_factor(c.node.attrs), out_f32(c), c.node.shape.numel(), x.stream);
}

#define TS_CUDA_UNARY(fn, op)                                                               \
  void fn(const OpCall& c, const CudaContext& x) {                                          \
    cuda::unary(cuda::Unary::op, in_f32(c, 0), out_f32(c), c.node.shape.numel(), x.stream); \
  }
TS_CUDA_UNARY(gelu, kGelu)
TS_CUDA_UNARY(relu, kRelu)
TS_CUDA_UNARY(exp, kExp)
TS_CUDA_UNARY(log, kLog)
TS_CUDA_UNARY(tanh, kTanh)
#undef TS_CUDA_UNARY

#define TS_CUDA_UNARY_GRAD(fn, op)                                                \
  void fn(const OpCall& c, const CudaContext& x) {                                \
    cuda::unary_grad(cuda::UnaryGrad::op, in_f32(c, 0), in_f32(c, 1), out_f32(c), \
                     c.node.shape.numel(), x.stream);                             \
  }
TS_CUDA_UNARY_GRAD(gelu_grad, kGelu)
TS_CUDA_UNARY_GRAD(relu_grad, kRelu)
TS_CUDA_UNARY_GRAD(tanh_grad, kTanh)
#undef TS_CUDA_UNARY_GRAD

void bias_gelu(const OpCall& c, const CudaContext& x) {
  const int64_t cols = in_shape(c, 1).numel();
  const int64_t rows = cols ? c.node.shape.numel() / cols : 0;
  cuda::bias_gelu(in_f32(c, 0), in_f32(c, 1), c.out, c.bf16_out, rows, cols, x.stream);
}

void bias_gelu_grad(const OpCall& c, const CudaContext& x) {
  const int64_t cols = in_shape(c, 1).numel();
  const int64_t rows = cols ? c.node.shape.numel() / cols : 0;
  cuda::bias_gelu_grad(in_f32(c, 0), in_f32(c, 1), in_f32(c, 2), out_f32(c), rows, cols, x.stream);
}

void reduce(const OpCall& c, const CudaContext& x) {
  const OpKind kind = c.node.kind;
  auto op = kind == OpKind::kReduceSum    ? cuda::Reduce::kSum
            : kind == OpKind::kReduceMean ? cuda::Reduce::kMean
                                          : cuda::Reduce::kMax;
  const Shape& in = in_shape(c, 0);
  if (op == cuda::Reduce::kMax && c.node.shape.numel() > 0 && in.numel() == 0)
    TS_THROW("reduce max over an empty set of elements");
  cuda::reduce(op, in_f32(c, 0), reduce_dims(in, c.node.attrs.dims), out_f32(c), x.stream);
}

void reduce_max_grad(const OpCall& c, const CudaContext& x) {
  cuda::reduce_max_grad(in_f32(c, 0), in_f32(c, 1), in_f32(c, 2),
                        reduce_dims(in_shape(c, 0), c.node.attrs.dims), out_f32(c), x.stream);
}

void expand(const OpCall& c, const CudaContext& x) {
  const Shape& out = c.node.shape;
  cuda::expand(in_f32(c, 0), to_dims(strides_over(in_shape(c, 0), out)), out_f32(c),
               to_dims(sizes_of(out)), out.rank(), x.stream);
}

void softmax_forward(const OpCall& c, const CudaContext& x) {
  const Shape& in = in_shape(c, 0);
  const Attrs& at = c.node.attrs;
  const Around a = around(in, at.dim);
  int64_t query_size = 0, query_stride = 1;
  if (!causal_query_dim(at).empty()) {
    TS_CHECK(a.inner == 1, "causal softmax needs inner == 1, got inner ", a.inner);
    query_size = in.size(causal_query_dim(at));
    query_stride = in.stride(causal_query_dim(at)) / a.n;
  }
  cuda::softmax(in_f32(c, 0), out_f32(c), a.outer, a.n, a.inner, softmax_scale(at), query_size,
                query_stride, x.stream);
}

void softmax_backward(const OpCall& c, const CudaContext& x) {
  const Around a = around(in_shape(c, 0), c.node.attrs.dim);
  cuda::softmax_grad(in_f32(c, 0), in_f32(c, 1), c.out, c.bf16_out, a.outer, a.n, a.inner,
                     softmax_scale(c.node.attrs), x.stream);
}

// Rows and columns of a LayerNorm node (columns: its normalised dim).
std::pair<int64_t, int64_t> rows_cols(const Node& node) {
  const int64_t cols = node.shape.size(node.attrs.dim);
  return {cols ? node.shape.numel() / cols : 0, cols};
}

void layernorm(const OpCall& c, const CudaContext& x) {
  const auto [rows, cols] = rows_cols(c.node);
  cuda::layernorm(in_f32(c, 0), in_f32(c, 1), in_f32(c, 2), c.out, c.bf16_out, rows, cols,
                  layernorm_eps(c.node.attrs), x.stream);
}

void layernorm_grad_input(const OpCall& c, const CudaContext& x) {
  const auto [rows, cols] = rows_cols(c.node);
  cuda::layernorm_grad_input(in_f32(c, 0), in_f32(c, 1), in_f32(c, 2), out_f32(c), rows, cols,
                             layernorm_eps(c.node.attrs), x.stream);
}

// Scratch: d(beta) (cols floats, rounded up to 16 bytes), then the row stats.
size_t dbeta_bytes(int64_t cols) {
  return (static_cast<size_t>(cols) * sizeof(float) + 15) / 16 * 16;
}

void layernorm_grad_gamma(const OpCall& c, const CudaContext& x) {
  const int64_t cols = c.node.shape.numel();
  const int64_t rows = cols ? in_shape(c, 0).numel() / cols : 0;
  auto* scratch = static_cast<uint8_t*>(c.scratch);
  cuda::layernorm_grad_params(in_f32(c, 0), in_f32(c, 1), out_f32(c),
                              reinterpret_cast<float*>(scratch), scratch + dbeta_bytes(cols), rows,
                              cols, layernorm_eps(c.node.attrs), x.stream);
}

void embedding(const OpCall& c, const CudaContext& x) {
  const Shape& table = in_shape(c, 0);
  const int64_t vocab = table[0].size;
  cuda::embedding(in_f32(c, 0), in_i32(c, 1), out_f32(c), in_shape(c, 1).numel(), vocab,
                  vocab ? table.numel() / vocab : 0, x.stream);
}

void embedding_grad(const OpCall& c, const CudaContext& x) {
  const int64_t vocab = c.node.shape[0].size;
  cuda::embedding_grad(in_i32(c, 0), in_f32(c, 1), out_f32(c), in_shape(c, 0).numel(), vocab,
                       vocab ? c.node.shape.numel() / vocab : 0, x.stream);
}

void cross_entropy(const OpCall& c, const CudaContext& x) {
  const Shape& logits = in_shape(c, 0);
  const int64_t vocab = logits.size(c.node.attrs.dim);
  TS_CHECK(vocab > 0, "cross_entropy '", c.node.name, "': empty vocab");
  cuda::cross_entropy(in_f32(c, 0), in_i32(c, 1), out_f32(c), static_cast<double*>(c.scratch),
                      logits.numel() / vocab, vocab, x.stream);
}

void cross_entropy_grad(const OpCall& c, const CudaContext& x) {
  const int64_t vocab = c.node.shape.size(c.node.attrs.dim);
  TS_CHECK(vocab > 0, "cross_entropy_grad '", c.node.name, "': empty vocab");
  cuda::cross_entropy_grad(in_f32(c, 0), in_i32(c, 1), in_f32(c, 2), out_f32(c),
                           c.node.shape.numel() / vocab, vocab, x.stream);
}

// backend/cpu/dropout_op.cc's counters (dropout_counters) and
// kernels/dropout.cc's key: element e's counter is base + sum over dims of
// (coord + offset) * stride, the row dim striding by a whole row; the stream
// is keyed by (seed, the stream name's hash ^ the step's high bits), its lane
// the step's low 32 bits.
void dropout(const OpCall& c, const CudaContext& x) {
  const Attrs& at = c.node.attrs;
  const Shape& local = c.node.shape;
  const bool sharded = !at.offsets.empty();  // refused before here; kept general
  const Shape& global = sharded ? at.shape : local;
  const int rank = local.rank();
  const float p = dropout_p(at);
  if (!(p >= 0.0f && p <= 1.0f)) TS_THROW("dropout: probability ", p, " is outside [0, 1]");
  const int row =
      dropout_row_dim(at).empty() ? -1 : local.index_of(dropout_row_dim(at)).value_or(-1);
  if (!dropout_row_dim(at).empty() && row < 0)
    TS_THROW("dropout '", c.node.name, "': row dim '", dropout_row_dim(at), "' is not in ",
             local.to_string());
  const DropoutCounters counters = dropout_counters(global, row);
  cuda::DropoutArgs a;
  a.rank = rank;
  a.sizes = to_dims(sizes_of(local));
  for (int i = 0; i < rank; ++i) a.offsets.v[i] = sharded ? at.offsets[i] : 0;
  a.strides = to_dims(counters.stride);
  a.base = c.position.microbatch * counters.microbatch;
  if (p == 0.0f) {  // a copy, as the CPU kernel (no mask drawn)
    if (c.out != in_f32(c, 0))
      cuda::expand(in_f32(c, 0), to_dims(strides_over(local, local)), out_f32(c),
                   to_dims(sizes_of(local)), rank, x.stream);
    return;
  }
  const uint64_t step = static_cast<uint64_t>(c.position.step);
  const uint64_t name_hash = hash_name(dropout_stream(at)) ^ ((step >> 32) * 0x9E3779B97F4A7C15ull);
  const uint64_t mixed = at.seed * 0x9E3779B97F4A7C15ull ^ name_hash;  // PhiloxStream's key
  a.k0 = static_cast<uint32_t>(mixed);
  a.k1 = static_cast<uint32_t>(mixed >> 32);
  a.salt = static_cast<uint32_t>(name_hash >> 32) ^ static_cast<uint32_t>(at.seed);
  a.lane = static_cast<uint32_t>(step);
  a.p = p;
  a.keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  cuda::dropout(in_f32(c, 0), out_f32(c), a, x.stream);
}

CudaKernelTable make_table() {
  CudaKernelTable t{};
  auto set = [&t](OpKind kind, CudaKernel kernel) { t[static_cast<size_t>(kind)] = kernel; };
  set(OpKind::kFill, fill);
  set(OpKind::kEinsum, einsum);
  set(OpKind::kAdd, add);
  set(OpKind::kSub, sub);
  set(OpKind::kMul, mul);
  set(OpKind::kDiv, div);
  set(OpKind::kScale, scale);
  set(OpKind::kGelu, gelu);
  set(OpKind::kRelu, relu);
  set(OpKind::kExp, exp);
  set(OpKind::kLog, log);
  set(OpKind::kTanh, tanh);
  set(OpKind::kBiasGelu, bias_gelu);
  set(OpKind::kDropout, dropout);
  set(OpKind::kReduceSum, reduce);
  set(OpKind::kReduceMean, reduce);
  set(OpKind::kReduceMax, reduce);
  set(OpKind::kExpand, expand);
  set(OpKind::kSoftmax, softmax_forward);
  set(OpKind::kLayerNorm, layernorm);
  set(OpKind::kEmbedding, embedding);
  set(OpKind::kCrossEntropy, cross_entropy);
  set(OpKind::kGeluGrad, gelu_grad);
  set(OpKind::kReluGrad, relu_grad);
  set(OpKind::kTanhGrad, tanh_grad);
  set(OpKind::kBiasGeluGrad, bias_gelu_grad);
  set(OpKind::kReduceMaxGrad, reduce_max_grad);
  set(OpKind::kSoftmaxGrad, softmax_backward);
  set(OpKind::kLayerNormGradInput, layernorm_grad_input);
  set(OpKind::kLayerNormGradGamma, layernorm_grad_gamma);
  set(OpKind::kEmbeddingGrad, embedding_grad);
  set(OpKind::kCrossEntropyGrad, cross_entropy_grad);
  return t;
}

}  // namespace

const CudaKernelTable& cuda_kernel_table() {
  static const CudaKernelTable table = make_table();
  return table;
}

std::vector<OpKind> op_kinds_without_cuda_kernel() {
  std::vector<OpKind> missing;
  for (int k = 0; k < static_cast<int>(OpKind::kCount); ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (is_instruction_kind(kind) && !cuda_kernel_table()[k]) missing.push_back(kind);
  }
  return missing;
}

void execute_cuda_kernel(const OpCall& call, const CudaContext& context) {
  const Node& node = call.node;
  if (is_sharded_op(node))
    TS_THROW(op_name(node.kind), " '", node.name,
             "': collectives and sharded ops are not on CUDA yet");
  check_kernel_rank(call, node.shape, "CUDA kernels'");
  for (ValueId in : node.inputs)
    check_kernel_rank(call, call.graph.node(in).shape, "CUDA kernels'");
  const CudaKernel kernel = cuda_kernel_table()[static_cast<size_t>(node.kind)];
  if (!kernel) TS_THROW(op_name(node.kind), " '", node.name, "' has no CUDA kernel yet");
  kernel(call, context);
}

size_t cuda_scratch_bytes(const Graph& graph, const Node& node, const kernels::EinsumPlan* einsum) {
  if (is_sharded_op(node)) return 0;  // refused by execute_cuda_kernel
  switch (node.kind) {
    case OpKind::kEinsum:
      return static_cast<size_t>(einsum->scratch_elements()) * sizeof(float);
    case OpKind::kLayerNormGradGamma: {
      const int64_t cols = node.shape.numel();
      const int64_t rows = cols ? graph.node(node.inputs[0]).shape.numel() / cols : 0;
      return dbeta_bytes(cols) + cuda::layernorm_grad_params_scratch(rows);
    }
    case OpKind::kCrossEntropy: {
      const Shape& logits = graph.node(node.inputs[0]).shape;
      const int64_t vocab = logits.size(node.attrs.dim);
      return vocab ? static_cast<size_t>(logits.numel() / vocab) * sizeof(double) : 0;
    }
    default:
      return 0;
  }
}

// The same kinds as the CPU backend: their kernels take a bf16 output.
bool cuda_writes_bf16_itself(const Node& node) { return cpu_writes_bf16_itself(node); }

}  // namespace tessel
