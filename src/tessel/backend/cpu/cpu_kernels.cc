#include "tessel/backend/cpu/cpu_kernels.h"

#include <algorithm>
#include <array>

#include "tessel/backend/cpu/attention_op.h"
#include "tessel/backend/cpu/dropout_op.h"
#include "tessel/backend/cpu/linear_cross_entropy_op.h"
#include "tessel/backend/cpu/sharded_ops.h"
#include "tessel/base/around.h"
#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"
#include "tessel/ir/op_table.h"
#include "tessel/kernels/cross_entropy.h"
#include "tessel/kernels/einsum.h"
#include "tessel/kernels/elementwise.h"
#include "tessel/kernels/embedding.h"
#include "tessel/kernels/layernorm.h"
#include "tessel/kernels/reduce.h"
#include "tessel/kernels/rmsnorm.h"
#include "tessel/kernels/rotary.h"
#include "tessel/kernels/softmax.h"
#include "tessel/kernels/unary_math.h"

// The fast kernel or its naive twin; TS_OUT_KERNEL for a fast kernel
// templated on its output (f32 here, bf16 where the call stores it so).
#define TS_KERNEL(name) (call.reference ? kernels::name##_ref : kernels::name)
#define TS_OUT_KERNEL(name) (call.reference ? kernels::name##_ref : kernels::name<float>)

namespace tessel {
namespace {

uint16_t* out_bf16(const OpCall& call) { return static_cast<uint16_t*>(call.out); }

struct ReduceArgs {
  DimArray sizes;
  std::array<bool, kMaxKernelRank> reduced;
  int rank;
};
ReduceArgs reduce_args(const Shape& x, const std::vector<std::string>& dims) {
  ReduceArgs r{sizes_of(x), {}, x.rank()};
  for (int i = 0; i < x.rank(); ++i)
    r.reduced[i] = std::find(dims.begin(), dims.end(), x[i].name) != dims.end();
  return r;
}

template <kernels::BinaryOp kOp>
void binary(const OpCall& call) {
  const Shape& out = call.node.shape;
  auto sa = strides_over(in_shape(call, 0), out);
  auto sb = strides_over(in_shape(call, 1), out);
  auto sizes = sizes_of(out);
  if (call.bf16_out)
    return kernels::binary(kOp, in_f32(call, 0), sa.data(), in_f32(call, 1), sb.data(),
                           out_bf16(call), sizes.data(), out.rank());
  TS_OUT_KERNEL(binary)
  (kOp, in_f32(call, 0), sa.data(), in_f32(call, 1), sb.data(), out_f32(call), sizes.data(),
   out.rank());
}

void softmax_forward(const OpCall& call) {
  const Shape& x = in_shape(call, 0);
  const Attrs& at = call.node.attrs;
  Around a = around(x, at.dim);
  kernels::CausalMask mask{};
  const kernels::CausalMask* mask_ptr = nullptr;
  if (!causal_query_dim(at).empty()) {
    mask.query_size = x.size(causal_query_dim(at));
    mask.query_stride = x.stride(causal_query_dim(at)) / a.n;  // rows exclude the (last) key dim
    mask_ptr = &mask;
  }
  TS_KERNEL(softmax_forward)
  (in_f32(call, 0), out_f32(call), a.outer, a.n, a.inner, softmax_scale(at), mask_ptr);
}

void softmax_backward(const OpCall& call) {
  Around a = around(in_shape(call, 0), call.node.attrs.dim);
  if (call.bf16_out)
    return kernels::softmax_backward(in_f32(call, 0), in_f32(call, 1), out_bf16(call), a.outer, a.n,
                                     a.inner, softmax_scale(call.node.attrs));
  TS_OUT_KERNEL(softmax_backward)
  (in_f32(call, 0), in_f32(call, 1), out_f32(call), a.outer, a.n, a.inner,
   softmax_scale(call.node.attrs));
}

// One function per op kind, for the table below.
void fill(const OpCall& call) {
  float* out = out_f32(call);
  std::fill(out, out + call.node.shape.numel(), fill_value(call.node.attrs));
}

void einsum(const OpCall& call) {
  if (call.einsum_bf16 && !call.reference) {
    const void* a = call.bf16_in[0] ? call.bf16_in[0] : in_f32(call, 0);
    const void* b = call.bf16_in[1] ? call.bf16_in[1] : in_f32(call, 1);
    call.einsum_bf16->run(a, b, call.out, call.scratch, call.bias);  // bf16 where stored so
  } else if (call.reference) {
    kernels::einsum_ref(in_shape(call, 0), in_f32(call, 0), in_shape(call, 1), in_f32(call, 1),
                        call.node.shape, out_f32(call));
  } else {
    kernels::einsum(*call.einsum, in_f32(call, 0), in_f32(call, 1), out_f32(call),
                    static_cast<float*>(call.scratch));
  }
}

void scale(const OpCall& call) {
  TS_KERNEL(scale)
  (in_f32(call, 0), scale_factor(call.node.attrs), out_f32(call), call.node.shape.numel());
}

// An elementwise unary kernel: (x, out, n).
#define TS_UNARY(fn, kernel)                                                    \
  void fn(const OpCall& call) {                                                 \
    TS_KERNEL(kernel)(in_f32(call, 0), out_f32(call), call.node.shape.numel()); \
  }
TS_UNARY(gelu, gelu)
TS_UNARY(relu, relu)
TS_UNARY(exp, exp_forward)
TS_UNARY(log, log_forward)
TS_UNARY(tanh, tanh_forward)
TS_UNARY(silu, silu_forward)
TS_UNARY(sigmoid, sigmoid_forward)
TS_UNARY(sqrt, sqrt_forward)
TS_UNARY(rsqrt, rsqrt_forward)
#undef TS_UNARY

// An elementwise gradient kernel: (x or y, dy, out, n).
#define TS_UNARY_GRAD(fn, kernel)                                               \
  void fn(const OpCall& call) {                                                 \
    TS_KERNEL(kernel)                                                           \
    (in_f32(call, 0), in_f32(call, 1), out_f32(call), call.node.shape.numel()); \
  }
TS_UNARY_GRAD(gelu_grad, gelu_backward)
TS_UNARY_GRAD(relu_grad, relu_backward)
TS_UNARY_GRAD(tanh_grad, tanh_backward)
TS_UNARY_GRAD(silu_grad, silu_backward)
TS_UNARY_GRAD(sigmoid_grad, sigmoid_backward)
#undef TS_UNARY_GRAD

void bias_gelu(const OpCall& call) {
  const int64_t numel = call.node.shape.numel();
  const int64_t cols = in_shape(call, 1).numel();
  if (call.bf16_out)
    return kernels::bias_gelu(in_f32(call, 0), in_f32(call, 1), out_bf16(call), numel / cols, cols);
  TS_OUT_KERNEL(bias_gelu)(in_f32(call, 0), in_f32(call, 1), out_f32(call), numel / cols, cols);
}

void bias_gelu_grad(const OpCall& call) {
  const int64_t numel = call.node.shape.numel();
  const int64_t cols = in_shape(call, 1).numel();
  TS_KERNEL(bias_gelu_backward)
  (in_f32(call, 0), in_f32(call, 1), in_f32(call, 2), out_f32(call), numel / cols, cols);
}

void reduce(const OpCall& call) {
  const OpKind kind = call.node.kind;
  auto op = kind == OpKind::kReduceSum    ? kernels::ReduceOp::kSum
            : kind == OpKind::kReduceMean ? kernels::ReduceOp::kMean
                                          : kernels::ReduceOp::kMax;
  ReduceArgs r = reduce_args(in_shape(call, 0), call.node.attrs.dims);
  TS_KERNEL(reduce)(op, in_f32(call, 0), r.sizes.data(), r.rank, r.reduced.data(), out_f32(call));
}

void reduce_max_grad(const OpCall& call) {
  ReduceArgs r = reduce_args(in_shape(call, 0), call.node.attrs.dims);
  TS_KERNEL(reduce_max_backward)
  (in_f32(call, 0), in_f32(call, 1), in_f32(call, 2), r.sizes.data(), r.rank, r.reduced.data(),
   out_f32(call));
}

void expand(const OpCall& call) {
  const Shape& out = call.node.shape;
  auto strides = strides_over(in_shape(call, 0), out);
  auto sizes = sizes_of(out);
  TS_KERNEL(expand)(in_f32(call, 0), strides.data(), out_f32(call), sizes.data(), out.rank());
}

void layernorm(const OpCall& call) {
  const int64_t numel = call.node.shape.numel();
  const int64_t cols = call.node.shape.size(call.node.attrs.dim);
  const float eps = layernorm_eps(call.node.attrs);
  if (call.bf16_out)
    return kernels::layernorm_forward(in_f32(call, 0), in_f32(call, 1), in_f32(call, 2),
                                      out_bf16(call), numel / cols, cols, eps);
  TS_OUT_KERNEL(layernorm_forward)
  (in_f32(call, 0), in_f32(call, 1), in_f32(call, 2), out_f32(call), numel / cols, cols, eps);
}

void layernorm_grad_input(const OpCall& call) {
  const int64_t numel = call.node.shape.numel();
  const int64_t cols = call.node.shape.size(call.node.attrs.dim);
  TS_KERNEL(layernorm_backward_input)
  (in_f32(call, 0), in_f32(call, 1), in_f32(call, 2), out_f32(call), numel / cols, cols,
   layernorm_eps(call.node.attrs));
}

void layernorm_grad_gamma(const OpCall& call) {
  const int64_t cols = call.node.shape.numel();
  TS_KERNEL(layernorm_backward_params)
  (in_f32(call, 0), in_f32(call, 1), out_f32(call), static_cast<float*>(call.scratch),
   in_shape(call, 0).numel() / cols, cols, layernorm_eps(call.node.attrs));
}

void rmsnorm(const OpCall& call) {
  const int64_t numel = call.node.shape.numel();
  const int64_t cols = call.node.shape.size(call.node.attrs.dim);
  const float eps = rmsnorm_eps(call.node.attrs);
  if (call.bf16_out)
    return kernels::rmsnorm_forward(in_f32(call, 0), in_f32(call, 1), out_bf16(call), numel / cols,
                                    cols, eps);
  TS_OUT_KERNEL(rmsnorm_forward)
  (in_f32(call, 0), in_f32(call, 1), out_f32(call), numel / cols, cols, eps);
}

void rmsnorm_grad_input(const OpCall& call) {
  const int64_t numel = call.node.shape.numel();
  const int64_t cols = call.node.shape.size(call.node.attrs.dim);
  TS_KERNEL(rmsnorm_backward_input)
  (in_f32(call, 0), in_f32(call, 1), in_f32(call, 2), out_f32(call), numel / cols, cols,
   rmsnorm_eps(call.node.attrs));
}

void rmsnorm_grad_gamma(const OpCall& call) {
  const int64_t cols = call.node.shape.numel();
  TS_KERNEL(rmsnorm_backward_gamma)
  (in_f32(call, 0), in_f32(call, 1), out_f32(call), in_shape(call, 0).numel() / cols, cols,
   rmsnorm_eps(call.node.attrs));
}

// The (outer, positions, inner) view of a rotary node's value; on a rank's
// local graph the position dim's shard offset comes from attrs.offsets.
kernels::RotaryView rotary_view(const Node& node) {
  const Attrs& at = node.attrs;
  const Around a = around(node.shape, rotary_position_dim(at));
  kernels::RotaryView v{a.outer,
                        a.n,
                        a.inner,
                        node.shape.size(at.dim),
                        0,
                        rotary_theta(at),
                        node.kind == OpKind::kRotaryGrad,
                        parse_rotary_scaling(rotary_scaling(at))};
  if (!at.offsets.empty()) v.offset = at.offsets.at(*node.shape.index_of(rotary_position_dim(at)));
  return v;
}

void rotary(const OpCall& call) {
  const kernels::RotaryView v = rotary_view(call.node);
  if (call.reference) return kernels::rotary_ref(in_f32(call, 0), out_f32(call), v);
  kernels::rotary(in_f32(call, 0), out_f32(call), v, static_cast<float*>(call.scratch));
}

void embedding(const OpCall& call) {
  const Shape& table = in_shape(call, 0);
  const int64_t vocab = table[0].size;
  TS_KERNEL(embedding_forward)
  (in_f32(call, 0), in_i32(call, 1), out_f32(call), in_shape(call, 1).numel(), vocab,
   table.numel() / vocab);
}

void embedding_grad(const OpCall& call) {
  const int64_t vocab = call.node.shape[0].size;
  TS_KERNEL(embedding_backward)
  (in_i32(call, 0), in_f32(call, 1), out_f32(call), in_shape(call, 0).numel(), vocab,
   call.node.shape.numel() / vocab);
}

void cross_entropy(const OpCall& call) {
  const Shape& logits = in_shape(call, 0);
  const int64_t vocab = logits.size(call.node.attrs.dim);
  *out_f32(call) = TS_KERNEL(cross_entropy_forward)(in_f32(call, 0), in_i32(call, 1),
                                                    logits.numel() / vocab, vocab);
}

void cross_entropy_grad(const OpCall& call) {
  const int64_t numel = call.node.shape.numel();
  const int64_t vocab = call.node.shape.size(call.node.attrs.dim);
  TS_KERNEL(cross_entropy_backward)
  (in_f32(call, 0), in_i32(call, 1), *in_f32(call, 2), out_f32(call), numel / vocab, vocab);
}

// The boxing's collectives and local reshards (and the sharded forms of
// embedding, cross-entropy and dropout, chosen by their attrs in execute).
void sharded(const OpCall& call) { execute_sharded_op(call, call.comms); }

CpuKernelTable make_table() {
  CpuKernelTable t{};
  auto set = [&t](OpKind kind, CpuKernel kernel) { t[static_cast<size_t>(kind)] = kernel; };
  set(OpKind::kFill, fill);
  set(OpKind::kEinsum, einsum);
  set(OpKind::kAdd, binary<kernels::BinaryOp::kAdd>);
  set(OpKind::kSub, binary<kernels::BinaryOp::kSub>);
  set(OpKind::kMul, binary<kernels::BinaryOp::kMul>);
  set(OpKind::kDiv, binary<kernels::BinaryOp::kDiv>);
  set(OpKind::kScale, scale);
  set(OpKind::kGelu, gelu);
  set(OpKind::kRelu, relu);
  set(OpKind::kExp, exp);
  set(OpKind::kLog, log);
  set(OpKind::kTanh, tanh);
  set(OpKind::kBiasGelu, bias_gelu);
  set(OpKind::kDropout, execute_dropout);
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
  set(OpKind::kSilu, silu);
  set(OpKind::kSigmoid, sigmoid);
  set(OpKind::kSqrt, sqrt);
  set(OpKind::kRsqrt, rsqrt);
  set(OpKind::kRmsNorm, rmsnorm);
  set(OpKind::kRotary, rotary);
  set(OpKind::kSiluGrad, silu_grad);
  set(OpKind::kSigmoidGrad, sigmoid_grad);
  set(OpKind::kRmsNormGradInput, rmsnorm_grad_input);
  set(OpKind::kRmsNormGradGamma, rmsnorm_grad_gamma);
  set(OpKind::kRotaryGrad, rotary);
  set(OpKind::kAttention, execute_attention);
  set(OpKind::kAttentionGrad, execute_attention_grad);
  set(OpKind::kLinearCrossEntropy, execute_linear_cross_entropy);
  set(OpKind::kLinearCrossEntropyGrad, execute_linear_cross_entropy_grad);
  for (OpKind kind : {OpKind::kShardSlice, OpKind::kAllGather, OpKind::kReduceScatter,
                      OpKind::kAllReduce, OpKind::kAllToAll, OpKind::kZeroUnlessRoot})
    set(kind, sharded);
  return t;
}

}  // namespace

void check_kernel_rank(const OpCall& call, const Shape& s, const char* kernels) {
  if (s.rank() > kMaxKernelRank)
    TS_THROW(op_name(call.node.kind), " '", call.node.name, "': rank ", s.rank(), " of ", s,
             " exceeds the ", kernels, " limit of ", kMaxKernelRank);
}

DimArray strides_over(const Shape& x, const Shape& target) {
  DimArray s{};
  for (int i = 0; i < target.rank(); ++i)
    if (auto j = x.index_of(target[i].name)) {
      int64_t stride = 1;
      for (int k = *j + 1; k < x.rank(); ++k) stride *= x[k].size;
      s[i] = stride;
    }
  return s;
}

DimArray sizes_of(const Shape& s) {
  DimArray sizes{};
  for (int i = 0; i < s.rank(); ++i) sizes[i] = s[i].size;
  return sizes;
}

bool is_instruction_kind(OpKind kind) {
  return kind != OpKind::kInput && kind != OpKind::kParam && kind != OpKind::kCount &&
         !op_info(kind).is_view();
}

const CpuKernelTable& cpu_kernel_table() {
  static const CpuKernelTable table = make_table();
  return table;
}

void execute_cpu_kernel(const OpCall& call) {
  const Node& node = call.node;
  check_kernel_rank(call, node.shape, "kernels'");
  for (ValueId in : node.inputs) check_kernel_rank(call, call.graph.node(in).shape, "kernels'");
  if (is_sharded_op(node)) return execute_sharded_op(call, call.comms);
  const CpuKernel kernel = cpu_kernel_table()[static_cast<size_t>(node.kind)];
  TS_CHECK(kernel, op_name(node.kind), " is not an instruction");
  kernel(call);
}

size_t cpu_scratch_bytes(const Graph& graph, const Node& node, const kernels::EinsumPlan* einsum,
                         int threads, bool bf16_operands) {
  if (is_sharded_op(node)) return sharded_scratch_bytes(graph, node);
  switch (node.kind) {
    case OpKind::kEinsum:
      return static_cast<size_t>(einsum->scratch_elements()) * sizeof(float);
    case OpKind::kLayerNormGradGamma:  // the kernel also produces d(beta); it lands here
      return static_cast<size_t>(node.shape.numel()) * sizeof(float);
    case OpKind::kRotary:  // the cos/sin table
    case OpKind::kRotaryGrad:
      return static_cast<size_t>(kernels::rotary_table_floats(rotary_view(node))) * sizeof(float);
    case OpKind::kAttentionGrad:
      return attention_grad_scratch_bytes(graph, node, threads);
    case OpKind::kLinearCrossEntropy:
    case OpKind::kLinearCrossEntropyGrad:
      return linear_cross_entropy_scratch_bytes(graph, node, bf16_operands);
    default:
      return 0;
  }
}

bool cpu_writes_bf16_itself(const Node& node) {
  if (is_sharded_op(node)) return false;
  switch (node.kind) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kBiasGelu:
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
    case OpKind::kSoftmaxGrad:
      return true;
    default:
      return false;
  }
}

}  // namespace tessel
