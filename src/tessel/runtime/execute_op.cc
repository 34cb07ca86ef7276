#include "tessel/runtime/execute_op.h"

#include <algorithm>
#include <array>
#include <cstring>

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
#include "tessel/kernels/softmax.h"
#include "tessel/runtime/sharded_ops.h"

// The fast kernel or its naive twin.
#define TS_KERNEL(name) (call.reference ? kernels::name##_ref : kernels::name)

namespace tessel {
namespace {

float* out_f32(const OpCall& call) { return static_cast<float*>(call.out); }
uint16_t* out_bf16(const OpCall& call) { return static_cast<uint16_t*>(call.out); }

// Per-dim sizes and strides live in fixed arrays on the stack: dispatch
// allocates nothing.
constexpr int kMaxRank = 8;
using DimArray = std::array<int64_t, kMaxRank>;

void check_rank(const OpCall& call, const Shape& s) {
  if (s.rank() > kMaxRank)
    TS_THROW(op_name(call.node.kind), " '", call.node.name, "': rank ", s.rank(), " of ", s,
             " exceeds the kernels' limit of ", kMaxRank);
}

// Strides of `x` laid over the dims of `target` (0 where x lacks the dim).
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

struct ReduceArgs {
  DimArray sizes;
  std::array<bool, kMaxRank> reduced;
  int rank;
};
ReduceArgs reduce_args(const Shape& x, const std::vector<std::string>& dims) {
  ReduceArgs r{sizes_of(x), {}, x.rank()};
  for (int i = 0; i < x.rank(); ++i)
    r.reduced[i] = std::find(dims.begin(), dims.end(), x[i].name) != dims.end();
  return r;
}

void binary(const OpCall& call, kernels::BinaryOp op) {
  const Shape& out = call.node.shape;
  auto sa = strides_over(in_shape(call, 0), out);
  auto sb = strides_over(in_shape(call, 1), out);
  auto sizes = sizes_of(out);
  if (call.bf16_out)
    return kernels::binary_to_bf16(op, in_f32(call, 0), sa.data(), in_f32(call, 1), sb.data(),
                                   out_bf16(call), sizes.data(), out.rank());
  TS_KERNEL(binary)
  (op, in_f32(call, 0), sa.data(), in_f32(call, 1), sb.data(), out_f32(call), sizes.data(),
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
    return kernels::softmax_backward_to_bf16(in_f32(call, 0), in_f32(call, 1), out_bf16(call),
                                             a.outer, a.n, a.inner, softmax_scale(call.node.attrs));
  TS_KERNEL(softmax_backward)
  (in_f32(call, 0), in_f32(call, 1), out_f32(call), a.outer, a.n, a.inner,
   softmax_scale(call.node.attrs));
}

}  // namespace

size_t scratch_bytes(const Graph& graph, const Node& node, const kernels::EinsumPlan* einsum) {
  if (is_sharded_op(node)) return sharded_scratch_bytes(graph, node);
  switch (node.kind) {
    case OpKind::kEinsum:
      return static_cast<size_t>(einsum->scratch_elements()) * sizeof(float);
    case OpKind::kLayerNormGradGamma:  // the kernel also produces d(beta); it lands here
      return static_cast<size_t>(node.shape.numel()) * sizeof(float);
    default:
      return 0;
  }
}

bool writes_bf16_itself(const Node& node) {
  if (is_sharded_op(node)) return false;
  switch (node.kind) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kBiasGelu:
    case OpKind::kLayerNorm:
    case OpKind::kSoftmaxGrad:
      return true;
    default:
      return false;
  }
}

void execute_op(const OpCall& call) {
  const Node& node = call.node;
  check_rank(call, node.shape);
  for (ValueId in : node.inputs) check_rank(call, call.graph.node(in).shape);
  if (is_sharded_op(node)) return execute_sharded_op(call, call.comms);
  const int64_t numel = node.shape.numel();
  float* out = out_f32(call);
  switch (node.kind) {
    case OpKind::kInput:
    case OpKind::kParam:
    case OpKind::kSplitDim:
    case OpKind::kMergeDims:
    case OpKind::kRename:
    case OpKind::kShardSlice:
    case OpKind::kAllGather:
    case OpKind::kReduceScatter:
    case OpKind::kAllReduce:
    case OpKind::kAllToAll:
    case OpKind::kZeroUnlessRoot:
    case OpKind::kCount:
      TS_CHECK(false, op_name(node.kind), " is not an instruction");
    case OpKind::kFill:
      std::fill(out, out + numel, fill_value(node.attrs));
      return;
    case OpKind::kEinsum:
      if (call.einsum_bf16 && !call.reference) {
        const void* a = call.bf16_in[0] ? call.bf16_in[0] : in_f32(call, 0);
        const void* b = call.bf16_in[1] ? call.bf16_in[1] : in_f32(call, 1);
        call.einsum_bf16->run(a, b, call.out, call.scratch, call.bias);  // bf16 where stored so
      } else if (call.reference) {
        kernels::einsum_ref(in_shape(call, 0), in_f32(call, 0), in_shape(call, 1), in_f32(call, 1),
                            node.shape, out);
      } else {
        kernels::einsum(*call.einsum, in_f32(call, 0), in_f32(call, 1), out,
                        static_cast<float*>(call.scratch));
      }
      return;
    case OpKind::kAdd:
      return binary(call, kernels::BinaryOp::kAdd);
    case OpKind::kSub:
      return binary(call, kernels::BinaryOp::kSub);
    case OpKind::kMul:
      return binary(call, kernels::BinaryOp::kMul);
    case OpKind::kDiv:
      return binary(call, kernels::BinaryOp::kDiv);
    case OpKind::kScale:
      return TS_KERNEL(scale)(in_f32(call, 0), scale_factor(node.attrs), out, numel);
    case OpKind::kGelu:
      return TS_KERNEL(gelu)(in_f32(call, 0), out, numel);
    case OpKind::kRelu:
      return TS_KERNEL(relu)(in_f32(call, 0), out, numel);
    case OpKind::kExp:
      return TS_KERNEL(exp_forward)(in_f32(call, 0), out, numel);
    case OpKind::kLog:
      return TS_KERNEL(log_forward)(in_f32(call, 0), out, numel);
    case OpKind::kTanh:
      return TS_KERNEL(tanh_forward)(in_f32(call, 0), out, numel);
    case OpKind::kBiasGelu: {
      int64_t cols = in_shape(call, 1).numel();
      if (call.bf16_out)
        return kernels::bias_gelu_to_bf16(in_f32(call, 0), in_f32(call, 1), out_bf16(call),
                                          numel / cols, cols);
      return TS_KERNEL(bias_gelu)(in_f32(call, 0), in_f32(call, 1), out, numel / cols, cols);
    }
    case OpKind::kDropout:
      return execute_dropout(call);
    case OpKind::kReduceSum:
    case OpKind::kReduceMean:
    case OpKind::kReduceMax: {
      auto op = node.kind == OpKind::kReduceSum    ? kernels::ReduceOp::kSum
                : node.kind == OpKind::kReduceMean ? kernels::ReduceOp::kMean
                                                   : kernels::ReduceOp::kMax;
      ReduceArgs r = reduce_args(in_shape(call, 0), node.attrs.dims);
      return TS_KERNEL(reduce)(op, in_f32(call, 0), r.sizes.data(), r.rank, r.reduced.data(), out);
    }
    case OpKind::kExpand: {
      auto strides = strides_over(in_shape(call, 0), node.shape);
      auto sizes = sizes_of(node.shape);
      return TS_KERNEL(expand)(in_f32(call, 0), strides.data(), out, sizes.data(),
                               node.shape.rank());
    }
    case OpKind::kSoftmax:
      return softmax_forward(call);
    case OpKind::kLayerNorm: {
      int64_t cols = node.shape.size(node.attrs.dim);
      if (call.bf16_out)
        return kernels::layernorm_forward_to_bf16(in_f32(call, 0), in_f32(call, 1), in_f32(call, 2),
                                                  out_bf16(call), numel / cols, cols,
                                                  layernorm_eps(node.attrs));
      return TS_KERNEL(layernorm_forward)(in_f32(call, 0), in_f32(call, 1), in_f32(call, 2), out,
                                          numel / cols, cols, layernorm_eps(node.attrs));
    }
    case OpKind::kEmbedding: {
      const Shape& table = in_shape(call, 0);
      int64_t vocab = table[0].size;
      return TS_KERNEL(embedding_forward)(in_f32(call, 0), in_i32(call, 1), out,
                                          in_shape(call, 1).numel(), vocab, table.numel() / vocab);
    }
    case OpKind::kCrossEntropy: {
      const Shape& logits = in_shape(call, 0);
      int64_t vocab = logits.size(node.attrs.dim);
      *out = TS_KERNEL(cross_entropy_forward)(in_f32(call, 0), in_i32(call, 1),
                                              logits.numel() / vocab, vocab);
      return;
    }
    case OpKind::kGeluGrad:
      return TS_KERNEL(gelu_backward)(in_f32(call, 0), in_f32(call, 1), out, numel);
    case OpKind::kReluGrad:
      return TS_KERNEL(relu_backward)(in_f32(call, 0), in_f32(call, 1), out, numel);
    case OpKind::kTanhGrad:
      return TS_KERNEL(tanh_backward)(in_f32(call, 0), in_f32(call, 1), out, numel);
    case OpKind::kBiasGeluGrad: {
      int64_t cols = in_shape(call, 1).numel();
      return TS_KERNEL(bias_gelu_backward)(in_f32(call, 0), in_f32(call, 1), in_f32(call, 2), out,
                                           numel / cols, cols);
    }
    case OpKind::kReduceMaxGrad: {
      ReduceArgs r = reduce_args(in_shape(call, 0), node.attrs.dims);
      return TS_KERNEL(reduce_max_backward)(in_f32(call, 0), in_f32(call, 1), in_f32(call, 2),
                                            r.sizes.data(), r.rank, r.reduced.data(), out);
    }
    case OpKind::kSoftmaxGrad:
      return softmax_backward(call);
    case OpKind::kLayerNormGradInput: {
      int64_t cols = node.shape.size(node.attrs.dim);
      return TS_KERNEL(layernorm_backward_input)(in_f32(call, 0), in_f32(call, 1), in_f32(call, 2),
                                                 out, numel / cols, cols,
                                                 layernorm_eps(node.attrs));
    }
    case OpKind::kLayerNormGradGamma: {
      const Shape& x = in_shape(call, 0);
      int64_t cols = numel;
      return TS_KERNEL(layernorm_backward_params)(
          in_f32(call, 0), in_f32(call, 1), out, static_cast<float*>(call.scratch),
          x.numel() / cols, cols, layernorm_eps(node.attrs));
    }
    case OpKind::kEmbeddingGrad: {
      const Shape& table = node.shape;
      int64_t vocab = table[0].size;
      return TS_KERNEL(embedding_backward)(in_i32(call, 0), in_f32(call, 1), out,
                                           in_shape(call, 0).numel(), vocab, numel / vocab);
    }
    case OpKind::kCrossEntropyGrad: {
      int64_t vocab = node.shape.size(node.attrs.dim);
      return TS_KERNEL(cross_entropy_backward)(in_f32(call, 0), in_i32(call, 1), *in_f32(call, 2),
                                               out, numel / vocab, vocab);
    }
  }
}

}  // namespace tessel
