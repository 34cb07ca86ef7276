#include "tessel/backend/cpu/attention_op.h"

#include <cstdint>

#include "tessel/backend/cpu/dropout_op.h"
#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/ir/attrs.h"
#include "tessel/ir/model_contract.h"
#include "tessel/kernels/attention.h"

namespace tessel {
namespace {

// The counters of the dropout on the probabilities: dropout's
// (dropout_counters) over their global shape, row dim `batch`, the shard's
// offsets along the row dims folded into the base and along the query and
// key dims into their first positions.
kernels::AttentionDropout attention_dropout_of(const OpCall& call, const Shape& q, const Shape& k) {
  const Attrs& a = call.node.attrs;
  kernels::AttentionDropout d;
  d.p = attention_dropout_p(a);
  if (d.p == 0.0f) return d;
  d.seed = a.seed;
  d.key_hash = hash_name(attention_dropout_stream(a));
  d.step = static_cast<uint64_t>(call.position.step);
  // An unlowered graph (a single process without lowering): local is global.
  const bool sharded = !a.offsets.empty();
  const Shape probs = attention_probabilities_shape(a, q, k);
  const Shape& global = sharded ? a.shape : probs;
  TS_CHECK(global.names() == probs.names() &&
               (!sharded || static_cast<int>(a.offsets.size()) == probs.rank()),
           "attention '", call.node.name, "': dropout over ", global, " with ", a.offsets.size(),
           " shard offsets, its probabilities are ", probs);
  const DropoutCounters c = dropout_counters(global, global.index_of(kBatchDim).value_or(-1));
  const int rows = probs.rank() - 2;
  auto offset = [&](int i) { return sharded ? a.offsets[i] : int64_t{0}; };
  d.base = call.position.microbatch * c.microbatch;
  for (int i = 0; i < rows; ++i) {
    d.row[i] = c.stride[i];
    d.base += offset(i) * c.stride[i];
  }
  d.query = c.stride[rows];
  d.key = c.stride[rows + 1];
  d.query0 = offset(rows);
  d.key0 = offset(rows + 1);
  return d;
}

}  // namespace

kernels::AttentionLayout attention_layout_of(const OpCall& call) {
  kernels::AttentionLayout l = attention_layout_of(call.graph, call.node);
  l.bf16 = call.bf16_operands;
  l.dropout = attention_dropout_of(call, in_shape(call, 0), in_shape(call, 1));
  return l;
}

kernels::AttentionLayout attention_layout_of(const Graph& graph, const Node& node) {
  const Attrs& a = node.attrs;
  const std::vector<std::string>& dims = attention_dims(a);
  const std::string &query = dims[0], &key = dims[1], &head = dims[2];
  const Shape& q = graph.node(node.inputs[0]).shape;
  const Shape& k = graph.node(node.inputs[1]).shape;
  const Shape lse = q.without({head});
  kernels::AttentionLayout l;
  l.sq = q.size(query);
  l.sk = k.size(key);
  l.d = q.size(head);
  l.q_seq = q.stride(query);
  l.q_head = q.stride(head);
  l.k_seq = k.stride(key);
  l.k_head = k.stride(head);
  l.lse_seq = lse.stride(query);
  for (const Dim& d : q.dims()) {
    if (d.name == query || d.name == head) continue;
    TS_CHECK(l.row_rank < kernels::kMaxAttentionRowDims, "attention '", node.name, "': more than ",
             kernels::kMaxAttentionRowDims, " row dims in ", q);
    l.row_size[l.row_rank] = d.size;
    l.q_row[l.row_rank] = q.stride(d.name);
    l.k_row[l.row_rank] = k.stride(d.name);
    l.lse_row[l.row_rank] = lse.stride(d.name);
    ++l.row_rank;
  }
  l.causal = !causal_query_dim(a).empty();
  l.scale = attention_scale(a);
  return l;
}

kernels::AttentionInput attention_input(const OpCall& call, int i) {
  if (i < 3 && call.bf16_in[i]) return {call.bf16_in[i], true};
  if (i == 4 && call.bf16_in[3]) return {call.bf16_in[3], true};
  return {in_f32(call, i), false};
}

float* tuple_element(const OpCall& call, int i) {
  return reinterpret_cast<float*>(static_cast<uint8_t*>(call.out) + call.node.elements[i].offset);
}

void execute_attention(const OpCall& call) {
  const kernels::AttentionLayout l = attention_layout_of(call);
  if (call.reference)
    return kernels::attention_forward_ref(l, in_f32(call, 0), in_f32(call, 1), in_f32(call, 2),
                                          tuple_element(call, 0), tuple_element(call, 1));
  kernels::attention_forward(l, attention_input(call, 0), attention_input(call, 1),
                             attention_input(call, 2), tuple_element(call, 0),
                             tuple_element(call, 1));
}

void execute_attention_grad(const OpCall& call) {
  const kernels::AttentionLayout l = attention_layout_of(call);
  if (call.reference)
    return kernels::attention_backward_ref(l, in_f32(call, 0), in_f32(call, 1), in_f32(call, 2),
                                           in_f32(call, 3), in_f32(call, 4), tuple_element(call, 0),
                                           tuple_element(call, 1), tuple_element(call, 2));
  kernels::attention_backward(
      l, attention_input(call, 0), attention_input(call, 1), attention_input(call, 2),
      in_f32(call, 3), attention_input(call, 4), tuple_element(call, 0), tuple_element(call, 1),
      tuple_element(call, 2), static_cast<float*>(call.scratch), call.threads);
}

size_t attention_grad_scratch_bytes(const Graph& graph, const Node& node, int threads) {
  const kernels::AttentionLayout l = attention_layout_of(graph, node);
  return static_cast<size_t>(kernels::attention_backward_scratch_floats(l, threads)) *
         sizeof(float);
}

}  // namespace tessel
