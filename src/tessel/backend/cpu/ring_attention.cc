#include "tessel/backend/cpu/ring_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "tessel/backend/cpu/attention_op.h"
#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"

namespace tessel {
namespace {

struct Ring {
  Communicator& comm;
  int rank, size;
  int64_t chunk;  // positions per rank
  int next() const { return (rank + 1) % size; }
  int prev() const { return (rank + size - 1) % size; }
  int owner(int step) const { return (rank - step % size + size) % size; }
};

Ring ring_of(const OpCall& call, Communicator& comm) {
  const Attrs& a = call.node.attrs;
  TS_CHECK(comm.size() == a.count && comm.rank() == a.offset, "ring attention '", call.node.name,
           "': axis '", a.axis, "' has ", comm.size(), " ranks, the program expects ", a.count);
  return {comm, static_cast<int>(a.offset), static_cast<int>(a.count),
          in_shape(call, 0).size(attention_dims(a)[0])};
}

// The kernel's layout for this rank's queries against the chunk of `owner`.
kernels::AttentionLayout pair_layout(const OpCall& call, const Ring& ring, int owner) {
  kernels::AttentionLayout l = attention_layout_of(call);
  l.causal_shift = (ring.rank - owner) * ring.chunk;
  return l;
}

bool pair_skipped(const kernels::AttentionLayout& l) { return l.causal && l.causal_shift < 0; }

// Input i (k or v) as f32 in `dst`: a bf16-stored input is widened (the
// kernel rounds its operands to bf16 anyway, so the numbers are the same).
void load_f32(const OpCall& call, int i, float* dst, int64_t n) {
  const kernels::AttentionInput in = attention_input(call, i);
  if (!in.bf16) {
    std::memcpy(dst, in.data, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(in.data);
  for (int64_t j = 0; j < n; ++j) dst[j] = bf16_bits_to_f32(src[j]);
}

// Sends `send` (n floats) to the next rank while `work` runs, then
// receives n floats from the previous rank into `recv`.
template <class Work>
void pass_on(const Ring& ring, const float* send, float* recv, int64_t n, int tag,
             const std::string& op, Work work) {
  std::unique_ptr<CommRequest> sent = ring.comm.start_send(send, n, ring.next(), tag, op);
  work();
  ring.comm.recv(recv, n, ring.prev(), tag, op);
  sent->wait();
}

// Merges a pair's (out, lse) into the running (out, lse): the softmax over
// both key sets, from each part's log-sum-exp. out is laid out as lse (of
// `rows` elements) with the head dim (size d) inserted at stride `inner`.
void merge_pair(float* out, float* lse, const float* pair_out, const float* pair_lse, int64_t rows,
                int64_t d, int64_t inner) {
#pragma omp parallel for schedule(static)
  for (int64_t j = 0; j < rows; ++j) {
    const float a = lse[j], b = pair_lse[j], m = std::max(a, b);
    const float total = m + std::log(std::exp(a - m) + std::exp(b - m));
    const float wa = std::exp(a - total), wb = std::exp(b - total);
    lse[j] = total;
    const int64_t outer = j / inner, in = j % inner;
    for (int64_t c = 0; c < d; ++c) {
      const int64_t e = (outer * d + c) * inner + in;
      out[e] = out[e] * wa + pair_out[e] * wb;
    }
  }
}

}  // namespace

bool is_ring_attention(const Node& node) {
  return (node.kind == OpKind::kAttention || node.kind == OpKind::kAttentionGrad) &&
         !node.attrs.axis.empty();
}

void execute_ring_attention(const OpCall& call, Communicator& comm) {
  const Ring ring = ring_of(call, comm);
  const Shape& q = in_shape(call, 0);
  const int64_t nk = in_shape(call, 1).numel(), nq = q.numel();
  const std::string& head = attention_dims(call.node.attrs)[2];
  const int64_t nl = nq / q.size(head);
  float* kv[2] = {static_cast<float*>(call.scratch), static_cast<float*>(call.scratch) + 2 * nk};
  float* pair_out = kv[1] + 2 * nk;
  float* pair_lse = pair_out + nq;
  float* out = tuple_element(call, 0);
  float* lse = tuple_element(call, 1);
  load_f32(call, 1, kv[0], nk);
  load_f32(call, 2, kv[0] + nk, nk);
  const kernels::AttentionInput qin = attention_input(call, 0);
  for (int t = 0; t < ring.size; ++t) {
    auto work = [&] {
      const kernels::AttentionLayout l = pair_layout(call, ring, ring.owner(t));
      if (pair_skipped(l)) return;
      const kernels::AttentionInput k{kv[t % 2], false}, v{kv[t % 2] + nk, false};
      if (t == 0) return kernels::attention_forward(l, qin, k, v, out, lse);
      kernels::attention_forward(l, qin, k, v, pair_out, pair_lse);
      merge_pair(out, lse, pair_out, pair_lse, nl, q.size(head), q.stride(head));
    };
    if (t + 1 == ring.size)
      work();
    else
      pass_on(ring, kv[t % 2], kv[(t + 1) % 2], 2 * nk, t, call.node.name, work);
  }
}

void execute_ring_attention_grad(const OpCall& call, Communicator& comm) {
  const Ring ring = ring_of(call, comm);
  const int64_t nk = in_shape(call, 1).numel();
  const int64_t nq = in_shape(call, 0).numel(), nl = in_shape(call, 3).numel();
  float* delta = static_cast<float*>(call.scratch);
  float* buf[2] = {delta + nl, delta + nl + 4 * nk};  // k, v, dk, dv
  const kernels::AttentionInput q = attention_input(call, 0), dout = attention_input(call, 4);
  const float* lse = in_f32(call, 3);
  float* dq = tuple_element(call, 0);
  std::fill(delta, delta + nl, 0.0f);
  std::fill(dq, dq + nq, 0.0f);
  // Pass 1: delta over every key chunk (k, v travel).
  load_f32(call, 1, buf[0], nk);
  load_f32(call, 2, buf[0] + nk, nk);
  for (int t = 0; t < ring.size; ++t) {
    auto work = [&] {
      kernels::AttentionLayout l = pair_layout(call, ring, ring.owner(t));
      if (pair_skipped(l)) return;
      l.accumulate = true;
      kernels::attention_backward_delta(l, q, {buf[t % 2], false}, {buf[t % 2] + nk, false}, lse,
                                        dout, delta);
    };
    if (t + 1 == ring.size)
      work();
    else
      pass_on(ring, buf[t % 2], buf[(t + 1) % 2], 2 * nk, t, call.node.name, work);
  }
  // Pass 2: dq here; dk, dv summed into the chunk's travelling accumulators,
  // sent on only once this rank's share is in (k and v go during the work).
  load_f32(call, 1, buf[0], nk);
  load_f32(call, 2, buf[0] + nk, nk);
  std::fill(buf[0] + 2 * nk, buf[0] + 4 * nk, 0.0f);
  const int tags = ring.size;
  for (int t = 0; t < ring.size; ++t) {
    float* b = buf[t % 2];
    float* next = buf[(t + 1) % 2];
    std::unique_ptr<CommRequest> kv_sent;
    if (t + 1 < ring.size)
      kv_sent = ring.comm.start_send(b, 2 * nk, ring.next(), tags + 2 * t, call.node.name);
    kernels::AttentionLayout l = pair_layout(call, ring, ring.owner(t));
    l.accumulate = true;
    if (!pair_skipped(l))
      kernels::attention_backward_grads(l, q, {b, false}, {b + nk, false}, lse, dout, delta, dq,
                                        b + 2 * nk, b + 3 * nk);
    // The last step sends the finished sums home (to the next rank, the owner).
    std::unique_ptr<CommRequest> grads_sent =
        ring.comm.start_send(b + 2 * nk, 2 * nk, ring.next(), tags + 2 * t + 1, call.node.name);
    if (kv_sent) ring.comm.recv(next, 2 * nk, ring.prev(), tags + 2 * t, call.node.name);
    ring.comm.recv(next + 2 * nk, 2 * nk, ring.prev(), tags + 2 * t + 1, call.node.name);
    if (kv_sent) kv_sent->wait();
    grads_sent->wait();
  }
  const float* home = buf[ring.size % 2] + 2 * nk;
  std::memcpy(tuple_element(call, 1), home, static_cast<size_t>(nk) * sizeof(float));
  std::memcpy(tuple_element(call, 2), home + nk, static_cast<size_t>(nk) * sizeof(float));
}

size_t ring_attention_scratch_bytes(const Graph& graph, const Node& node) {
  const int64_t nq = graph.node(node.inputs[0]).shape.numel();
  const int64_t nk = graph.node(node.inputs[1]).shape.numel();
  if (node.kind == OpKind::kAttention) {
    const std::string& head = attention_dims(node.attrs)[2];
    const int64_t nl = nq / graph.node(node.inputs[0]).shape.size(head);
    return static_cast<size_t>(4 * nk + nq + nl) * sizeof(float);
  }
  const int64_t nl = graph.node(node.inputs[3]).shape.numel();
  return static_cast<size_t>(nl + 8 * nk) * sizeof(float);
}
}  // namespace tessel
