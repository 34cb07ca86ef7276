// Context parallelism: fused attention on a mesh axis that splits its query
// dim (`seq`), docs/attention.md.
//
// An axis is a context axis of an attention node when the layout places the
// node's q split on its query dim there (so `--layout seq=ctx`, not Megatron
// sequence parallelism, where q is split on `heads` first). On that axis the
// op accepts one signature, by the layout's strategy:
// - all-to-all (Ulysses): every operand split on a heads dim (the first of
//   q's dims other than batch, query, key and head that no other axis
//   splits and the axis divides; else the first that an earlier axis splits,
//   tensor parallelism's heads, cut further inside that split, placement.h),
//   so the lowering's boxing exchanges S(seq) -> S(heads) before the op and
//   back after it; none: an error naming the dims, the axes and the sizes;
// - ring: q (and lse, dout) split on the query dim, k and v on the key dim;
//   the local op exchanges key/value chunks around the axis itself
//   (backend/cpu/ring_attention.h), told so by `ring_axis` attributes,
//   balanced: rank r of n computes halves r and 2n-1-r of the sequence's 2n
//   (the layout gives it 2r, 2r+1), so the dims must cut into 2n halves.
// Elements of the tuple that lack the query dim (dk, dv) are split on the
// key dim instead (tuple_element_sharding, sharding/signature.h).
#pragma once

#include "tessel/ir/graph.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/signature.h"

namespace tessel {

bool is_attention_op(OpKind kind);

// Whether `axis` is a context axis of attention node `node` (above).
bool is_context_axis(const Graph& graph, const Node& node, const Layout& layout, const Mesh& mesh,
                     int axis);

// The one signature `node` takes on context axis `axis`; `chosen`: q's
// placements on the axes before it, as the lowering chose them for this
// node. Throws (all-to-all) when no heads dim can be split.
AxisSignature context_parallel_signature(const Graph& graph, const Node& node, const Layout& layout,
                                         const Mesh& mesh, int axis, const Sharding& chosen);

// The half in `slot` (0: first half of the local chunk) of `rank` in each
// order, and the place (rank, slot) of half `half`.
enum class HalfOrder { kContiguous, kBalanced };
struct HalfPlace {
  int rank, slot;
};
int half_at(HalfOrder order, int rank, int ranks, int slot);
HalfPlace place_of(HalfOrder order, int half, int ranks);
int ring_halves_moved(int rank, int ranks);  // of its 2 halves, those another rank computes

// Bytes one rank sends per run in ring attention node `local`: balancing
// (the moved halves of q, k, v, then out, lse; backward q, dout, lse, k, v,
// out, then dq, dk, dv), then all: the ring's too (k, v n - 1 times;
// backward k, v, dk, dv n - 1 times, dk, dv once more).
double ring_balance_bytes_sent(const Graph& graph, const Node& local);
double ring_attention_bytes_sent(const Graph& graph, const Node& local);

}  // namespace tessel
