// Context parallelism: fused attention on a mesh axis that splits its query
// dim (`seq`), docs/attention.md.
//
// An axis is a context axis of an attention node when the layout places the
// node's q split on its query dim there (so `--layout seq=ctx`, not Megatron
// sequence parallelism, where q is split on `heads` first). On that axis the
// op accepts one signature, by the layout's strategy:
// - all-to-all (Ulysses): every operand split on a heads dim (the first of
//   q's dims other than batch, query, key and head that no other axis
//   splits and the axis divides), so the lowering's boxing exchanges
//   S(seq) -> S(heads) before the op and back after it; none: an error
//   naming the dims, the axis and the sizes;
// - ring: q (and lse, dout) split on the query dim, k and v on the key dim;
//   the local op exchanges key/value chunks around the axis itself
//   (backend/cpu/ring_attention.h), told so by `ring_axis` attributes. The
//   op balances the causal work (below), so the query and key dims must cut
//   into 2n equal halves on an axis of n ranks: else an error naming the
//   dim, the axis and the sizes.
//
// Ring load balancing (Megatron's order, done inside the op): the sequence
// is cut into 2n half-chunks; the layout gives rank r the contiguous halves
// 2r and 2r+1, the op moves them so that rank r computes halves r (its slot
// 0) and 2n-1-r (its slot 1), and moves the results back.
// Elements of the tuple that lack the query dim (dk, dv) are split on the
// key dim instead (tuple_element_sharding).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/signature.h"

namespace tessel {

bool is_attention_op(OpKind kind);

// Whether `axis` is a context axis of attention node `node` (above).
bool is_context_axis(const Graph& graph, const Node& node, const Layout& layout, const Mesh& mesh,
                     int axis);

// The one signature `node` takes on context axis `axis`; `taken`: dims other
// axes split for this node. Throws (all-to-all) when no heads dim can be split.
AxisSignature context_parallel_signature(const Graph& graph, const Node& node, const Layout& layout,
                                         const Mesh& mesh, int axis,
                                         const std::set<std::string>& taken);

// A half-chunk's place: a rank and a slot (0: first half of its local
// chunk, 1: second half).
struct HalfPlace {
  int rank, slot;
};
// The global half-chunk in `slot` of `rank` in the balanced order (r, 2n-1-r)
// and in the contiguous one (2r, 2r+1); where half-chunk `half` lives in each.
int balanced_half(int rank, int ranks, int slot);
int contiguous_half(int rank, int slot);
HalfPlace balanced_place(int half, int ranks);
HalfPlace contiguous_place(int half);
// How many of rank's two contiguous halves another rank computes (0 to 2):
// the halves of q, k, v (and dout, lse) it sends before the ring and of the
// results it receives back after it (and as many the other way).
int ring_halves_moved(int rank, int ranks);

// Bytes one rank sends per run in ring attention node `local` of local
// graph `graph` to balance it: ring_halves_moved halves of q, k, v there
// and of out, lse back; backward of q, dout, lse, k, v there and of dq, dk,
// dv back.
double ring_balance_bytes_sent(const Graph& graph, const Node& local);
// All its bytes: the balancing's, then the ring's: k and v to the next rank
// n - 1 times forward; backward, k and v n - 1 times (delta), then k, v,
// dk, dv n - 1 times and dk, dv once more (home).
double ring_attention_bytes_sent(const Graph& graph, const Node& local);

// The sharding of element `index` of attention tuple `tuple` placed as `s`:
// a split query dim that the element lacks is its key dim (dk, dv).
Sharding tuple_element_sharding(const Node& tuple, const Sharding& s, int index);

}  // namespace tessel
