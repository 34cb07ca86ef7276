#include "tessel/backend/cpu/ring_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tessel/backend/cpu/attention_op.h"
#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/base/shape.h"
#include "tessel/comm/communicator.h"
#include "tessel/ir/attrs.h"
#include "tessel/kernels/attention.h"
#include "tessel/sharding/context_parallel.h"

namespace tessel {
namespace {

// Ring attention's load balancing (sharding/context_parallel.h): a local
// chunk as two halves of its sequence dim, moved between the contiguous and
// the balanced order. Both have the local shape and strides (slot s:
// positions [s L/2, (s+1) L/2)): the kernel reads a slot as a view.
//
// A row-major tensor as (outer, len, inner) around its sequence dim.
struct Halves {
  int64_t outer = 1, len = 0, inner = 1;
  int64_t half() const { return len / 2; }
  int64_t numel() const { return outer * len * inner; }
  int64_t offset(int slot) const { return slot * half() * inner; }  // of slot's first element
  int64_t stage() const { return numel() + numel() / 2; }  // exchange(): 2 halves out, 1 in
};

Halves halves_of(const Shape& shape, const std::string& seq_dim) {
  const int64_t len = shape.size(seq_dim), inner = shape.stride(seq_dim);
  return {shape.numel() / (len * inner), len, inner};
}

// Copies half `from` of `src` (or all of a packed half when from < 0) into
// half `to` of `dst` (or a packed half when to < 0), widening bf16.
void copy_half(kernels::AttentionInput src, int from, float* dst, int to, const Halves& g) {
  const int64_t run = g.half() * g.inner;
  auto at = [&](int slot, int64_t o) {
    return slot < 0 ? o * run : o * g.len * g.inner + g.offset(slot);
  };
  for (int64_t o = 0; o < g.outer; ++o) {
    float* d = dst + at(to, o);
    if (src.bf16) {
      const uint16_t* s = static_cast<const uint16_t*>(src.data) + at(from, o);
      for (int64_t j = 0; j < run; ++j) d[j] = bf16_bits_to_f32(s[j]);
    } else if (const float* s = static_cast<const float*>(src.data) + at(from, o); s != d) {
      std::memcpy(d, s, static_cast<size_t>(run) * sizeof(float));  // (s == d: in place)
    }
  }
}

// Exchanges over the ring's axis (n >= 2 ranks); `stage` holds the largest
// Halves::stage(); each uses the next 2n tags.
struct HalfExchange {
  Communicator& comm;
  float* stage;
  int tag;
  const std::string& op;
  // This rank's halves of `src` into `dst` in order `to`; dst may be src's
  // f32 data (every half that leaves is packed first; at most one stays).
  void operator()(kernels::AttentionInput src, float* dst, const Halves& g, HalfOrder to) {
    const HalfOrder from =
        to == HalfOrder::kBalanced ? HalfOrder::kContiguous : HalfOrder::kBalanced;
    const int rank = comm.rank(), ranks = comm.size();
    const int64_t piece = g.outer * g.half() * g.inner;
    std::vector<std::unique_ptr<CommRequest>> sent;
    int stays = -1;
    for (int slot = 0; slot < 2; ++slot) {
      const int half = half_at(from, rank, ranks, slot);
      const HalfPlace dest = place_of(to, half, ranks);
      if (dest.rank == rank) {
        stays = slot;
        continue;
      }
      copy_half(src, slot, stage + slot * piece, -1, g);
      sent.push_back(comm.start_send(stage + slot * piece, piece, dest.rank, tag + half, op));
    }
    if (stays >= 0)
      copy_half(src, stays, dst, place_of(to, half_at(from, rank, ranks, stays), ranks).slot, g);
    for (int slot = 0; slot < 2; ++slot) {
      const int half = half_at(to, rank, ranks, slot);
      const HalfPlace source = place_of(from, half, ranks);
      if (source.rank == rank) continue;
      comm.recv(stage + 2 * piece, piece, source.rank, tag + half, op);
      copy_half({stage + 2 * piece, false}, -1, dst, slot, g);
    }
    for (std::unique_ptr<CommRequest>& s : sent) s->wait();
    tag += 2 * ranks;
  }
};

// The local operands around their sequence dims: q (and out, dout, dq), k
// (and v, dk, dv), the log-sum-exp (and delta).
struct RingShapes {
  Halves q, k, lse;
  // The exchanges' stage, which the forward's ring also uses for a pair's
  // out and lse.
  int64_t stage() const {
    return std::max({q.stage(), k.stage(), lse.stage(), q.numel() + lse.numel()});
  }
};

RingShapes ring_shapes(const Attrs& a, const Shape& q, const Shape& k) {
  const std::vector<std::string>& dims = attention_dims(a);
  return {halves_of(q, dims[0]), halves_of(k, dims[1]), halves_of(q.without({dims[2]}), dims[0])};
}

struct Ring {
  Communicator& comm;
  int rank, size;
  int next() const { return (rank + 1) % size; }
  int prev() const { return (rank + size - 1) % size; }
  int owner(int step) const { return (rank - step % size + size) % size; }
};

Ring ring_of(const OpCall& call, Communicator& comm) {
  const Attrs& a = call.node.attrs;
  TS_CHECK(comm.size() == a.count && comm.rank() == a.offset, "ring attention '", call.node.name,
           "': axis '", a.axis, "' has ", comm.size(), " ranks, the program expects ", a.count);
  return {comm, static_cast<int>(a.offset), static_cast<int>(a.count)};
}

// A query slot against a key slot (balanced order): layout, slot offsets.
struct HalfPair {
  kernels::AttentionLayout l;
  int64_t q = 0, k = 0, lse = 0;
};

// Calls f(pair, a) for each half pair of this rank's query slot a and
// `owner`'s key slot b that is not skipped.
template <class F>
void for_each_half_pair(const OpCall& call, const Ring& ring, int owner, F f) {
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 2; ++b) {
      HalfPair p;
      p.l = attention_layout_of(call);
      p.l.sq /= 2;
      p.l.sk /= 2;
      const int64_t qh = half_at(HalfOrder::kBalanced, ring.rank, ring.size, a),
                    kh = half_at(HalfOrder::kBalanced, owner, ring.size, b);
      if (p.l.causal && kh > qh) continue;
      p.l.causal_shift = (qh - kh) * p.l.sq;  // causal: sq == sk
      p.l.dropout.query0 = qh * p.l.sq;       // the halves' global positions
      p.l.dropout.key0 = kh * p.l.sk;
      p.l.accumulate = true;  // the backward sums over pairs (the forward merges)
      p.q = a * p.l.sq * p.l.q_seq;
      p.k = b * p.l.sk * p.l.k_seq;
      p.lse = a * p.l.sq * p.l.lse_seq;
      f(p, a);
    }
}

// Runs `step(t, buffer)` for t = 0 .. n-1 while the n floats at the
// buffer travel one rank on (buf[0] holds this rank's at the start): each
// step's send to the next rank starts before it, the receive follows it.
template <class Step>
void ring_steps(const Ring& ring, float* const buf[2], int64_t n, int tag, const std::string& op,
                Step step) {
  for (int t = 0; t < ring.size; ++t) {
    std::unique_ptr<CommRequest> sent;
    if (t + 1 < ring.size) sent = ring.comm.start_send(buf[t % 2], n, ring.next(), tag + t, op);
    step(t, buf[t % 2]);
    if (!sent) continue;
    ring.comm.recv(buf[(t + 1) % 2], n, ring.prev(), tag + t, op);
    sent->wait();
  }
}

// Merges a pair's (out, lse) into the running (out, lse) for the queries
// of slot `slot`: the softmax over both key sets, from each part's
// log-sum-exp. out is laid out as lse with the head dim (size d) inserted
// at stride `inner`.
void merge_pair(float* out, float* lse, const float* pair_out, const float* pair_lse,
                const Halves& g, int slot, int64_t d, int64_t inner) {
  const int64_t half = g.half();
#pragma omp parallel for schedule(static)
  for (int64_t os = 0; os < g.outer * half; ++os) {
    const int64_t first = (os / half) * g.len * g.inner + g.offset(slot) + (os % half) * g.inner;
    for (int64_t j = first; j < first + g.inner; ++j) {
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
}

kernels::AttentionInput at(const float* base, int64_t offset) { return {base + offset, false}; }

}  // namespace

bool is_ring_attention(const Node& node) {
  return (node.kind == OpKind::kAttention || node.kind == OpKind::kAttentionGrad) &&
         !node.attrs.axis.empty();
}

void execute_ring_attention(const OpCall& call, Communicator& comm) {
  const Ring ring = ring_of(call, comm);
  const RingShapes s = ring_shapes(call.node.attrs, in_shape(call, 0), in_shape(call, 1));
  const int64_t nk = s.k.numel(), nq = s.q.numel();
  float* kv[2] = {static_cast<float*>(call.scratch), static_cast<float*>(call.scratch) + 2 * nk};
  float *q = kv[1] + 2 * nk, *stage = q + nq;
  float *pair_out = stage, *pair_lse = stage + nq;  // during the ring only
  // out and lse are computed in the balanced order, then put back in place.
  float *out = tuple_element(call, 0), *lse = tuple_element(call, 1);
  const std::string& op = call.node.name;
  HalfExchange move{comm, stage, ring.size, op};  // tags after the ring's
  move(attention_input(call, 0), q, s.q, HalfOrder::kBalanced);
  move(attention_input(call, 1), kv[0], s.k, HalfOrder::kBalanced);
  move(attention_input(call, 2), kv[0] + nk, s.k, HalfOrder::kBalanced);
  const std::string& head = attention_dims(call.node.attrs)[2];
  const int64_t d = in_shape(call, 0).size(head), inner = in_shape(call, 0).stride(head);
  bool written[2] = {false, false};
  ring_steps(ring, kv, 2 * nk, 0, op, [&](int t, const float* k) {
    for_each_half_pair(call, ring, ring.owner(t), [&](const HalfPair& p, int a) {
      const bool first = !written[a];
      written[a] = true;
      kernels::attention_forward(p.l, at(q, p.q), at(k, p.k), at(k + nk, p.k),
                                 (first ? out : pair_out) + p.q, (first ? lse : pair_lse) + p.lse);
      if (!first) merge_pair(out, lse, pair_out, pair_lse, s.lse, a, d, inner);
    });
  });
  move({out, false}, out, s.q, HalfOrder::kContiguous);
  move({lse, false}, lse, s.lse, HalfOrder::kContiguous);
}

void execute_ring_attention_grad(const OpCall& call, Communicator& comm) {
  const Ring ring = ring_of(call, comm);
  const RingShapes s = ring_shapes(call.node.attrs, in_shape(call, 0), in_shape(call, 1));
  const int64_t nk = s.k.numel(), nq = s.q.numel(), nl = s.lse.numel();
  float* delta = static_cast<float*>(call.scratch);   // slot a's at delta + a * nl / 2
  float* buf[2] = {delta + nl, delta + nl + 4 * nk};  // k, v, dk, dv
  float *q = buf[1] + 4 * nk, *dout = q + nq, *lse = dout + nq;
  float* stage = lse + nl;
  float* dq = tuple_element(call, 0);  // in the balanced order, then put back in place
  const std::string& op = call.node.name;
  HalfExchange move{comm, stage, 2 * ring.size, op};  // tags after the ring's
  move(attention_input(call, 0), q, s.q, HalfOrder::kBalanced);
  move(attention_input(call, 4), dout, s.q, HalfOrder::kBalanced);
  move({in_f32(call, 3), false}, lse, s.lse, HalfOrder::kBalanced);
  move(attention_input(call, 1), buf[0], s.k, HalfOrder::kBalanced);
  move(attention_input(call, 2), buf[0] + nk, s.k, HalfOrder::kBalanced);
  // Each query's delta = rowsum(dout * out) (the output in dq's place until then).
  move({in_f32(call, 5), false}, dq, s.q, HalfOrder::kBalanced);
  for (int a = 0; a < 2; ++a) {
    kernels::AttentionLayout l = attention_layout_of(call);
    l.sq /= 2;
    l.sk /= 2;
    const int64_t at_q = a * l.sq * l.q_seq;
    kernels::attention_output_delta(l, at(dout, at_q), dq + at_q, delta + a * nl / 2);
  }
  std::fill(dq, dq + nq, 0.0f);
  std::fill(buf[0] + 2 * nk, buf[0] + 4 * nk, 0.0f);
  // One pass: dq here; dk, dv summed into the chunk's travelling
  // accumulators, sent on only once this rank's share is in (k and v go
  // during the work).
  for (int t = 0; t < ring.size; ++t) {
    float* b = buf[t % 2];
    float* next = buf[(t + 1) % 2];
    std::unique_ptr<CommRequest> kv_sent;
    if (t + 1 < ring.size) kv_sent = ring.comm.start_send(b, 2 * nk, ring.next(), 2 * t, op);
    for_each_half_pair(call, ring, ring.owner(t), [&](const HalfPair& p, int a) {
      kernels::attention_backward_grads(p.l, at(q, p.q), at(b, p.k), at(b + nk, p.k), lse + p.lse,
                                        at(dout, p.q), delta + a * nl / 2, dq + p.q,
                                        b + 2 * nk + p.k, b + 3 * nk + p.k);
    });
    // The last step sends the finished sums home (to the next rank, the owner).
    std::unique_ptr<CommRequest> grads_sent =
        ring.comm.start_send(b + 2 * nk, 2 * nk, ring.next(), 2 * t + 1, op);
    if (kv_sent) ring.comm.recv(next, 2 * nk, ring.prev(), 2 * t, op);
    ring.comm.recv(next + 2 * nk, 2 * nk, ring.prev(), 2 * t + 1, op);
    if (kv_sent) kv_sent->wait();
    grads_sent->wait();
  }
  const float* home = buf[ring.size % 2] + 2 * nk;
  move({dq, false}, dq, s.q, HalfOrder::kContiguous);
  move({home, false}, tuple_element(call, 1), s.k, HalfOrder::kContiguous);
  move({home + nk, false}, tuple_element(call, 2), s.k, HalfOrder::kContiguous);
}

size_t ring_attention_scratch_bytes(const Graph& graph, const Node& node) {
  const RingShapes s =
      ring_shapes(node.attrs, graph.node(node.inputs[0]).shape, graph.node(node.inputs[1]).shape);
  const int64_t nk = s.k.numel(), nq = s.q.numel(), nl = s.lse.numel();
  const int64_t floats = node.kind == OpKind::kAttention ? 4 * nk + nq + s.stage()
                                                         : 2 * nl + 8 * nk + 2 * nq + s.stage();
  return static_cast<size_t>(floats) * sizeof(float);
}

}  // namespace tessel
