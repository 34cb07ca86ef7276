#include "tessel/sharding/context_parallel.h"

#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"
#include "tessel/ir/model_contract.h"

namespace tessel {
namespace {

const std::string& query_dim_of(const Node& node) { return attention_dims(node.attrs)[0]; }
const std::string& key_dim_of(const Node& node) { return attention_dims(node.attrs)[1]; }

bool pinned_for_heads(const Node& node, const std::string& dim) {
  const std::vector<std::string>& dims = attention_dims(node.attrs);
  return dim == kBatchDim || std::find(dims.begin(), dims.end(), dim) != dims.end();
}

// Operand i's placement when the op is split on its query/key dims.
Placement ring_placement(const Graph& graph, const Node& node, size_t i) {
  const Shape& s = graph.node(node.inputs[i]).shape;
  return Placement::split(s.has(query_dim_of(node)) ? query_dim_of(node) : key_dim_of(node));
}

// The mesh axis after `axis` that q's target splits `dim` on, or "" (an
// axis before `axis` may hold the dim: the split on `axis` nests inside it).
std::string split_later(const Sharding& target, const Mesh& mesh, int axis,
                        const std::string& dim) {
  for (int b = axis + 1; b < target.axis_count(); ++b)
    if (target[b] == Placement::split(dim)) return mesh.axis(b).name;
  return "";
}

// Ulysses: a heads dim of q split over `axis`, all operands alike. A dim no
// earlier axis splits for this node is preferred; else one whose earlier
// split (tensor parallelism's heads) the axis cuts further, nested.
AxisSignature all_to_all_signature(const Graph& graph, const Node& node, const Layout& layout,
                                   const Mesh& mesh, int axis, const Sharding& chosen) {
  const Node& q = graph.node(node.inputs[0]);
  const Sharding target = layout.target(q.shape, q.name, mesh);
  const MeshAxis& a = mesh.axis(axis);
  std::string tried, nested;
  for (const Dim& d : q.shape.dims()) {
    if (pinned_for_heads(node, d.name)) continue;
    int64_t cut = a.size;
    std::string inside;
    for (int b = 0; b < axis; ++b) {
      if (!(chosen[b] == Placement::split(d.name))) continue;
      cut *= mesh.axis(b).size;
      inside += str_cat(" x ", mesh.axis(b).size, " of '", mesh.axis(b).name, "'");
    }
    const std::string later = split_later(target, mesh, axis, d.name);
    if (later.empty() && d.size % cut == 0) {
      if (inside.empty())
        return {d.name, std::vector<Placement>(node.inputs.size(), Placement::split(d.name)),
                Placement::split(d.name)};
      if (nested.empty()) nested = d.name;
      continue;
    }
    tried +=
        str_cat(tried.empty() ? "" : "; ", "'", d.name, "' (", d.size, ")",
                !later.empty() ? str_cat(" is split over mesh axis '", later, "', listed after '",
                                         a.name, "' (list '", a.name, "' after '", later,
                                         "' in the mesh to cut its heads further)")
                               : str_cat(" is not divisible by ", a.size, inside));
  }
  if (!nested.empty())
    return {nested, std::vector<Placement>(node.inputs.size(), Placement::split(nested)),
            Placement::split(nested)};
  TS_THROW("context_parallel \"all_to_all\": attention '", node.name, "' must split a heads dim ",
           "over mesh axis '", a.name, "' of size ", a.size, " (its `", query_dim_of(node),
           "` is split there), but ",
           tried.empty() ? str_cat("q ", q.shape, " has no heads dim") : tried,
           "; use heads (or kv_heads) divisible by ", a.size,
           " times the tensor-parallel degree, or context_parallel \"ring\"");
}

}  // namespace

bool is_attention_op(OpKind kind) {
  return kind == OpKind::kAttention || kind == OpKind::kAttentionGrad;
}

bool is_context_axis(const Graph& graph, const Node& node, const Layout& layout, const Mesh& mesh,
                     int axis) {
  if (!is_attention_op(node.kind) || mesh.axis(axis).size == 1) return false;
  const Node& q = graph.node(node.inputs[0]);
  const Placement p = layout.target(q.shape, q.name, mesh)[axis];
  return p.is_split() && p.dim == query_dim_of(node);
}

AxisSignature context_parallel_signature(const Graph& graph, const Node& node, const Layout& layout,
                                         const Mesh& mesh, int axis, const Sharding& chosen) {
  if (layout.context_parallel() == ContextParallel::kAllToAll)
    return all_to_all_signature(graph, node, layout, mesh, axis, chosen);
  const Shape& k = graph.node(node.inputs[1]).shape;
  const MeshAxis& a = mesh.axis(axis);
  const Shape& q = graph.node(node.inputs[0]).shape;
  for (const Dim& d : {q.dim(query_dim_of(node)), k.dim(key_dim_of(node))})
    if (d.size % (2 * a.size) != 0)
      TS_THROW("context_parallel \"ring\": attention '", node.name, "' cuts its `", d.name, "` (",
               d.size, ") into 2 x ", a.size, " = ", 2 * a.size,
               " equal half-chunks over mesh axis '", a.name, "' of size ", a.size,
               " (causal load balancing: rank r computes halves r and ", 2 * a.size, " - 1 - r)",
               ", which does not divide it; use a context divisible by ", 2 * a.size);
  AxisSignature sig{query_dim_of(node), {}, Placement::split(query_dim_of(node))};
  for (size_t i = 0; i < node.inputs.size(); ++i)
    sig.inputs.push_back(ring_placement(graph, node, i));
  return sig;
}

int half_at(HalfOrder order, int rank, int ranks, int slot) {
  if (order == HalfOrder::kContiguous) return 2 * rank + slot;
  return slot == 0 ? rank : 2 * ranks - 1 - rank;
}

HalfPlace place_of(HalfOrder order, int half, int ranks) {
  if (order == HalfOrder::kContiguous) return {half / 2, half % 2};
  return half < ranks ? HalfPlace{half, 0} : HalfPlace{2 * ranks - 1 - half, 1};
}

int ring_halves_moved(int rank, int ranks) {
  return (place_of(HalfOrder::kBalanced, 2 * rank, ranks).rank != rank) +
         (place_of(HalfOrder::kBalanced, 2 * rank + 1, ranks).rank != rank);
}

double ring_balance_bytes_sent(const Graph& graph, const Node& local) {
  auto bytes = [&](int input) { return 4.0 * graph.node(local.inputs[input]).shape.numel(); };
  const double part = ring_halves_moved(local.attrs.offset, local.attrs.count) / 2.0;
  if (local.kind == OpKind::kAttention)  // q, k, v there; out, lse back
    return part * (2 * bytes(0) + 2 * bytes(1) + 4.0 * local.elements[1].shape.numel());
  // q, dout, out, lse, k, v; dq, dk, dv
  return part * (4 * bytes(0) + bytes(3) + 4 * bytes(1));
}

double ring_attention_bytes_sent(const Graph& graph, const Node& local) {
  const double chunk = 4.0 * graph.node(local.inputs[1]).shape.numel();  // one of k, v, dk, dv
  const double steps = static_cast<double>(local.attrs.count - 1);
  // Forward: k, v each step; backward: k, v, dk, dv each step, dk, dv home.
  const double ring =
      local.kind == OpKind::kAttention ? steps * 2 * chunk : steps * 4 * chunk + 2 * chunk;
  return ring_balance_bytes_sent(graph, local) + ring;
}

}  // namespace tessel
