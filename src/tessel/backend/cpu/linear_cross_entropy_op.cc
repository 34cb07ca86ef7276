#include "tessel/backend/cpu/linear_cross_entropy_op.h"

#include <cmath>

#include "tessel/backend/cpu/attention_op.h"
#include "tessel/backend/cpu/sharded_ops.h"
#include "tessel/base/error.h"
#include "tessel/comm/comm_groups.h"
#include "tessel/kernels/linear_cross_entropy.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {
namespace {

kernels::LinearCeShape shape_of(const Graph& graph, const Node& node) {
  const Shape& w = graph.node(node.inputs[1]).shape;
  const int64_t vocab = w.size(node.attrs.dim), dim = w.size(node.attrs.dim2);
  return {graph.node(node.inputs[0]).shape.numel() / dim, vocab, dim,
          node.attrs.axis.empty() ? 0 : node.attrs.offset, w[0].name == node.attrs.dim};
}

// Every label in [0, global vocab): the vocab is split, so no kernel sees it whole.
void check_labels(const OpCall& call, const kernels::LinearCeShape& s) {
  const int64_t vocab = call.node.attrs.axis.empty() ? s.vocab : s.vocab * call.node.attrs.count;
  const int32_t* labels = in_i32(call, 2);
  for (int64_t r = 0; r < s.rows; ++r)
    if (labels[r] < 0 || labels[r] >= vocab)
      TS_THROW(op_name(call.node.kind), " '", call.node.name, "': label ", labels[r], " at row ", r,
               " is outside [0, ", vocab, ") (vocab size ", vocab, ")");
}

// Joins the vocab shards' statistics: the global max, each shard's sum
// rescaled to it and summed, the label's logit from the shard holding it.
void join_vocab_shards(const OpCall& call, int64_t rows, float* row_max, float* row_sum,
                       float* row_target, float* shard_max) {
  Communicator& comm = call.comms->axis(call.node.attrs.axis);
  std::copy(row_max, row_max + rows, shard_max);
  comm.all_reduce(row_max, rows, ReduceKind::kMax, call.node.name);
  for (int64_t r = 0; r < rows; ++r) row_sum[r] *= std::exp(shard_max[r] - row_max[r]);
  comm.all_reduce(row_sum, rows, ReduceKind::kSum, call.node.name);
  comm.all_reduce(row_target, rows, ReduceKind::kSum, call.node.name);
}

}  // namespace

void execute_linear_cross_entropy(const OpCall& call) {
  const kernels::LinearCeShape s = shape_of(call.graph, call.node);
  check_labels(call, s);
  float* stats = static_cast<float*>(call.scratch);
  float *row_max = stats, *row_sum = stats + s.rows, *row_target = stats + 2 * s.rows;
  void* kernel_scratch = static_cast<char*>(call.scratch) + round_up(4 * s.rows * sizeof(float));
  kernels::linear_ce_stats(s, in_f32(call, 0), in_f32(call, 1), in_i32(call, 2), call.bf16_operands,
                           row_max, row_sum, row_target, kernel_scratch);
  if (!call.node.attrs.axis.empty())
    join_vocab_shards(call, s.rows, row_max, row_sum, row_target, stats + 3 * s.rows);
  float* lse = tuple_element(call, 1);
  double total = 0;
  for (int64_t r = 0; r < s.rows; ++r) {
    lse[r] = row_max[r] + std::log(row_sum[r]);
    total += static_cast<double>(lse[r]) - row_target[r];
  }
  *tuple_element(call, 0) = static_cast<float>(total / s.rows * row_share(call, s.rows));
}

void execute_linear_cross_entropy_grad(const OpCall& call) {
  const kernels::LinearCeShape s = shape_of(call.graph, call.node);
  check_labels(call, s);
  const double dloss = *in_f32(call, 4) * row_share(call, s.rows);
  kernels::linear_ce_backward(s, in_f32(call, 0), in_f32(call, 1), in_i32(call, 2), in_f32(call, 3),
                              static_cast<float>(dloss / s.rows), call.bf16_operands,
                              tuple_element(call, 0), tuple_element(call, 1), call.scratch);
}

size_t linear_cross_entropy_scratch_bytes(const Graph& graph, const Node& node, bool bf16) {
  const kernels::LinearCeShape s = shape_of(graph, node);
  const size_t stats =
      node.kind == OpKind::kLinearCrossEntropy ? round_up(4 * s.rows * sizeof(float)) : 0;
  return stats + kernels::linear_ce_scratch_bytes(s, bf16);
}

}  // namespace tessel
