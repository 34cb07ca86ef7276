#include "tessel/sharding/lower.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <set>

#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"
#include "tessel/sharding/boxing.h"
#include "tessel/sharding/context_parallel.h"
#include "tessel/sharding/signature.h"

namespace tessel {
namespace {

// Cost of a signature that uses a parameter other than as its layout places
// it (see parameter_penalty): large enough that such a signature is taken
// only when no other exists.
constexpr double kMovedParameterPenalty = 1e18;

class Lowering {
 public:
  Lowering(const Graph& global, const Mesh& mesh, const Layout& layout, int rank,
           const LoweringOptions& options)
      : global_(global),
        mesh_(mesh),
        layout_(layout),
        options_(options),
        coords_(mesh.coords(rank)) {
    out_.local_of.assign(global.size(), -1);
    out_.sharding_of.resize(global.size());
    out_.first_local_of.assign(global.size(), -1);
    for (const auto& [id, stored] : options.targets) {
      const Node& node = global.node(id);
      if (node.kind != OpKind::kParam) continue;
      Sharding used = layout.target(node.shape, node.name, mesh);
      if (!(used == stored)) gathered_on_use_[id] = used;
    }
  }

  LocalGraph run(const std::vector<ValueId>& outputs) {
    const std::vector<bool> live = ancestors(global_, outputs);
    consumers_.assign(global_.size(), {});
    for (ValueId id = 0; id < global_.size(); ++id)
      if (live[id])
        for (ValueId in : global_.node(id).inputs) consumers_[in].push_back(id);
    for (ValueId o : outputs) is_output_.insert(o);
    for (ValueId id = 0; id < global_.size(); ++id) {
      if (options_.phase_boundary && id == *options_.phase_boundary + 1)
        forget_gathered_parameters();
      if (live[id] || is_leaf(global_.node(id))) lower(id);
    }
    return std::move(out_);
  }

 private:
  int axes() const { return static_cast<int>(mesh_.axes().size()); }

  void lower(ValueId id) {
    const Node& node = global_.node(id);
    out_.first_local_of[id] = out_.graph.size();
    auto forced = options_.targets.find(id);
    Sharding target = forced != options_.targets.end()
                          ? forced->second
                          : layout_.target(node.shape, node.name, mesh_);
    out_.sharding_of[id] = target;
    if (is_leaf(node)) {
      Shape local = target.local_shape(node.shape, mesh_);
      out_.local_of[id] = node.kind == OpKind::kInput
                              ? out_.graph.add_input(node.name, local, node.dtype)
                              : out_.graph.add_param(node.name, local, node.init);
      return;
    }
    if (node.kind == OpKind::kFill) {
      Attrs a = node.attrs;
      a.shape = target.local_shape(node.shape, mesh_);
      out_.local_of[id] = out_.graph.add(OpKind::kFill, {}, a, node.name);
      return;
    }
    // Choose a signature per axis. A tuple_get is placed as its tuple is:
    // a tuple is never boxed (ir/tuple.h), its elements are.
    std::vector<Sharding> need(node.inputs.size(), Sharding::replicated(axes()));
    Sharding produced = Sharding::replicated(axes());
    if (node.kind == OpKind::kTupleGet) {
      need[0] = out_.sharding_of[node.inputs[0]];
      produced = tuple_element_sharding(global_.node(node.inputs[0]), need[0],
                                        static_cast<int>(tuple_index(node.attrs)));
    }
    std::set<std::string> taken;
    for (int a = 0; a < axes() && node.kind != OpKind::kTupleGet; ++a) {
      const int n = mesh_.axis(a).size;
      if (n == 1) continue;
      const AxisSignature* best = nullptr;
      double best_cost = std::numeric_limits<double>::infinity();
      std::vector<AxisSignature> options =
          is_context_axis(global_, node, layout_, mesh_, a)
              ? std::vector<AxisSignature>{context_parallel_signature(global_, node, layout_, mesh_,
                                                                      a, need[0])}
              : candidates(global_, node, n, taken);
      // An input moves on this axis as the other axes hold it (a
      // data-parallel activation is a rank's rows, not the whole batch); the
      // output is costed whole, as before.
      const double out_bytes = bytes(node);
      std::vector<double> in_bytes;
      for (ValueId in : node.inputs)
        in_bytes.push_back(block_bytes(global_.node(in), out_.sharding_of[in], a));
      for (const AxisSignature& sig : options) {
        double cost = is_tuple(node) ? 0 : transition_bytes(sig.output, target[a], out_bytes, n);
        for (size_t i = 0; i < node.inputs.size(); ++i) {
          const Placement& have = out_.sharding_of[node.inputs[i]][a];
          // A conversion already made (the forward's gathered activation,
          // reused by backward) costs nothing more.
          if (!converted(node.inputs[i], a, sig.inputs[i]))
            cost += transition_bytes(have, sig.inputs[i], in_bytes[i], n) /
                    sibling_readers(node.inputs[i], id);
          cost += parameter_penalty(node.inputs[i], a, have, sig.inputs[i]);
        }
        // Equal costs: a split that is the target over a replicated result
        // (an expand or elementwise op of replicated inputs computes only
        // its block instead of the whole value and a slice of it). A
        // partial result keeps its place: it may stay partial to the output.
        if (cost < best_cost ||
            (cost == best_cost && sig.output.is_split() && sig.output == target[a] &&
             best->output.kind == Placement::kBroadcast))
          best_cost = cost, best = &sig;
      }
      TS_CHECK(best, "no signature for ", op_name(node.kind));
      for (size_t i = 0; i < node.inputs.size(); ++i) need[i] = need[i].with(a, best->inputs[i]);
      produced = produced.with(a, best->output);
      if (!best->dim.empty()) taken.insert(best->dim);
    }
    std::vector<ValueId> inputs;
    for (size_t i = 0; i < node.inputs.size(); ++i)
      inputs.push_back(boxed(node.inputs[i], need[i], node, i));
    Attrs attrs = localize(node, need, produced);
    ValueId local = out_.graph.add(node.kind, inputs, attrs, node.name);
    out_.local_of[id] = local;
    if (is_attention_op(node.kind) && !attrs.axis.empty()) note_ring(local);
    // A tuple stays as made. A partial sum feeding only a linear op (a sum,
    // a view) stays partial: the sum adds partials and one reduction follows
    // (Megatron's single all-reduce per block; one gradient all-reduce, at
    // the output).
    if (is_tuple(node) || stays_partial(id, produced)) {
      out_.sharding_of[id] = produced;
      return;
    }
    // A tuple element's view is also kept as its tuple placed it, for a
    // reader that takes it so (attention_grad reads the forward's output
    // and log-sum-exp as the all-to-all strategy's forward made them,
    // split on heads, instead of boxing them back from the target).
    if (node.kind == OpKind::kTupleGet && !(produced == target))
      cache_[id].emplace_back(produced, local);
    // Otherwise bring the output to its target. Only a program output that
    // no later node reads (a gradient) may be all-reduced in the background:
    // the program does not wait for a bucket before a reader runs.
    const bool overlap = is_output_.count(id) > 0 && consumers_[id].empty();
    out_.local_of[id] =
        apply_plan(local, node.shape, node.name, produced, target, "output to target", overlap);
  }

  // Readers of `v` of `reader`'s kind not lowered yet, `reader` included: a
  // conversion of v is cached, so such siblings (the q, k and v projections
  // of one normed value, or their weight gradients) may share it.
  double sibling_readers(ValueId v, ValueId reader) const {
    const OpKind kind = global_.node(reader).kind;
    const std::vector<ValueId>& c = consumers_[v];
    const auto n = std::count_if(std::lower_bound(c.begin(), c.end(), reader), c.end(),
                                 [&](ValueId r) { return global_.node(r).kind == kind; });
    return static_cast<double>(std::max<std::ptrdiff_t>(n, 1));
  }

  // Parameters are used as the layout places them. A tensor-parallel weight
  // is never gathered (memory stays predictable, as in Megatron); a weight
  // gathered on use (ZeRO-3: stored split on the data axis, laid out B there)
  // is always gathered — never used in its storage split, which would reshard
  // the activations around it instead.
  double parameter_penalty(ValueId v, int axis, const Placement& have,
                           const Placement& want) const {
    if (global_.node(v).kind != OpKind::kParam) return 0;
    if (auto g = gathered_on_use_.find(v); g != gathered_on_use_.end())
      return want == g->second[axis] ? 0 : kMovedParameterPenalty;
    return have.is_split() && !(want == have) ? kMovedParameterPenalty : 0;
  }

  // At the phase boundary: parameters gathered on use are gathered afresh in
  // backward, so the forward's gathered copies die with the forward's last use.
  void forget_gathered_parameters() {
    for (auto it = cache_.begin(); it != cache_.end();)
      it = gathered_on_use_.count(it->first) ? cache_.erase(it) : std::next(it);
  }

  bool stays_partial(ValueId id, const Sharding& produced) const {
    bool partial = false;
    for (const Placement& p : produced.placements()) partial |= p.kind == Placement::kPartialSum;
    if (!partial || is_output_.count(id) || consumers_[id].size() != 1) return false;
    return passes_partial(global_.node(consumers_[id][0]).kind);
  }

  // Whether `global_value` with axis `axis` placed as `p` (the rest as it
  // is) was already converted.
  bool converted(ValueId global_value, int axis, const Placement& p) const {
    auto it = cache_.find(global_value);
    if (it == cache_.end()) return false;
    // Compared axis by axis against the value's sharding with `axis` as `p`
    // (no Sharding built per signature and input).
    const std::vector<Placement>& have = out_.sharding_of[global_value].placements();
    for (const auto& [sharding, local] : it->second) {
      const std::vector<Placement>& made = sharding.placements();
      bool same = made.size() == have.size();
      for (size_t b = 0; same && b < have.size(); ++b)
        same = made[b] == (static_cast<int>(b) == axis ? p : have[b]);
      if (same) return true;
    }
    return false;
  }

  static double bytes(const Node& n) { return static_cast<double>(n.shape.numel()) * 4.0; }
  // Bytes of a rank's block of `n` held as `s` on every axis but `axis`.
  double block_bytes(const Node& n, const Sharding& s, int axis) const {
    return static_cast<double>(s.with(axis, Placement::broadcast()).local_numel(n.shape, mesh_)) *
           4.0;
  }

  // `global_value` converted to sharding `want` as input `input` of `user`,
  // cached so that one value needed the same way by several ops is
  // converted once.
  ValueId boxed(ValueId global_value, const Sharding& want, const Node& user, size_t input) {
    const Sharding& have = out_.sharding_of[global_value];
    if (have == want) return out_.local_of[global_value];
    std::vector<std::pair<Sharding, ValueId>>& made = cache_[global_value];
    for (const auto& [sharding, local] : made)
      if (sharding == want) return local;
    const Node& node = global_.node(global_value);
    ValueId v =
        apply_plan(out_.local_of[global_value], node.shape, node.name, have, want,
                   str_cat("input ", input, " of ", op_name(user.kind), " '", user.name, "'"));
    made.emplace_back(want, v);
    return v;
  }

  // `overlap`: the value is a program output (a gradient), so its final
  // all-reduce may run in the background, bucketed with others.
  ValueId apply_plan(ValueId local, const Shape& global_shape, const std::string& label,
                     const Sharding& from, const Sharding& to, const std::string& reason,
                     bool overlap = false) {
    std::vector<EmittedTransition> emitted;
    ValueId result = emit_boxing(out_.graph, local, global_shape, label, from, to, mesh_, coords_,
                                 overlap, &emitted);
    for (const EmittedTransition& e : emitted) {
      const Transition& t = e.transition;
      const std::string& axis = mesh_.axis(t.axis).name;
      out_.collectives.push_back(
          {e.local, t.op, axis, label, reason, t.from.to_string(), t.to.to_string(), t.bytes});
    }
    return result;
  }

  // Ring attention's sends, listed with the collectives (inspect).
  void note_ring(ValueId local) {
    const Node& n = out_.graph.node(local);
    const double sent = ring_attention_bytes_sent(out_.graph, n);
    out_.collectives.push_back({local, n.kind, n.attrs.axis, n.name,
                                "ring: key/value chunks to the next rank", "ring", "ring", sent});
  }

  // Rank-specific attributes of the local node.
  Attrs localize(const Node& node, const std::vector<Sharding>& need, const Sharding& produced) {
    Attrs a = node.attrs;
    switch (node.kind) {
      case OpKind::kExpand:
        a.shape = produced.local_shape(node.shape, mesh_);
        break;
      case OpKind::kDropout:
        a.shape = node.shape;
        a.offsets = produced.local_offsets(node.shape, mesh_, coords_);
        break;
      case OpKind::kRotary:
      case OpKind::kRotaryGrad:  // positions are global: the shard's offset along each dim
        a.offsets = produced.local_offsets(node.shape, mesh_, coords_);
        break;
      case OpKind::kEmbedding:
        vocab_shard(need[0], global_.node(node.inputs[0]).shape, node.attrs.dim, a);
        break;
      case OpKind::kAttention:
      case OpKind::kAttentionGrad:  // ring attention: q split on its query dim
        if (int axis = need[0].axis_of(attention_dims(node.attrs)[0]); axis >= 0) {
          a.axis = mesh_.axis(axis).name;
          a.count = mesh_.axis(axis).size;
          a.offset = coords_[axis];
        }
        if (attention_dropout_p(a) > 0.0f) attention_dropout_shard(node, need, a);
        break;
      case OpKind::kEmbeddingGrad:
        a.shape = produced.local_shape(node.shape, mesh_);
        vocab_shard(produced, node.shape, node.attrs.dim, a);
        break;
      case OpKind::kCrossEntropy:
      case OpKind::kCrossEntropyGrad:
      case OpKind::kLinearCrossEntropy:
      case OpKind::kLinearCrossEntropyGrad: {
        // Logits (or the weight making them) and labels: inputs 0 and 1, or 1 and 2.
        const int first =
            node.kind == OpKind::kCrossEntropy || node.kind == OpKind::kCrossEntropyGrad ? 0 : 1;
        const Shape& labels = global_.node(node.inputs[first + 1]).shape;
        if (!(need[first + 1].local_shape(labels, mesh_) == labels)) a.total = labels.numel();
        vocab_shard(need[first], global_.node(node.inputs[first]).shape, node.attrs.dim, a);
        break;
      }
      default:
        break;
    }
    return a;
  }

  // Dropout on attention's probabilities draws by global index: their
  // global shape and this rank's offset along each dim, from q's and k's
  // shardings (the ring puts its query and key halves in place itself).
  void attention_dropout_shard(const Node& node, const std::vector<Sharding>& need, Attrs& a) {
    const Shape &q = global_.node(node.inputs[0]).shape, &k = global_.node(node.inputs[1]).shape;
    a.shape = attention_probabilities_shape(a, q, k);
    const std::vector<int64_t> q_at = need[0].local_offsets(q, mesh_, coords_),
                               k_at = need[1].local_offsets(k, mesh_, coords_);
    a.offsets.clear();
    for (const Dim& d : a.shape.dims()) {
      const bool key = d.name == attention_dims(a)[1];
      a.offsets.push_back(key ? k_at[*k.index_of(d.name)] : q_at[*q.index_of(d.name)]);
    }
  }

  // Marks a vocab-sharded op: the axis, its size and the first vocab row here.
  void vocab_shard(const Sharding& s, const Shape& global_shape, const std::string& vocab,
                   Attrs& a) {
    int axis = s.axis_of(vocab);
    if (axis < 0) return;
    a.axis = mesh_.axis(axis).name;
    a.count = mesh_.axis(axis).size;
    a.offset = coords_[axis] * (global_shape.size(vocab) / a.count);
  }

  const Graph& global_;
  const Mesh& mesh_;
  const Layout& layout_;
  const LoweringOptions& options_;
  std::map<ValueId, Sharding> gathered_on_use_;  // parameter -> the sharding ops use it at
  std::vector<int> coords_;
  LocalGraph out_;
  std::vector<std::vector<ValueId>> consumers_;
  std::set<ValueId> is_output_;
  // Conversions made: per global value, each sharding it was converted to
  // and the local value holding it (compared as Shardings: formatting them
  // as keys took a tenth of the planner's search).
  std::map<ValueId, std::vector<std::pair<Sharding, ValueId>>> cache_;
};

}  // namespace

ValueId emit_boxing(Graph& graph, ValueId local, const Shape& global, const std::string& label,
                    const Sharding& from, const Sharding& to, const Mesh& mesh,
                    const std::vector<int>& coords, bool overlap,
                    std::vector<EmittedTransition>* emitted) {
  if (from == to) return local;
  for (const Transition& t : plan_boxing(global, from, to, mesh)) {
    const MeshAxis& axis = mesh.axis(t.axis);
    Attrs a;
    a.axis = axis.name;
    a.count = axis.size;
    a.offset = coords.at(t.axis);
    a.dim = t.from.is_split() ? t.from.dim : t.to.dim;
    if (t.op == OpKind::kAllToAll) all_to_all_dim(a) = t.to.dim;
    if (t.op == OpKind::kAllReduce)
      allreduce_kind(a) = t.from.kind == Placement::kPartialMax ? "max" : "sum";
    if (t.op == OpKind::kZeroUnlessRoot || t.op == OpKind::kAllReduce) a.dim.clear();
    a.overlap = overlap && t.op == OpKind::kAllReduce && allreduce_kind(a) == "sum";
    local = graph.add(t.op, {local}, a, label + "." + op_name(t.op));
    if (emitted) emitted->push_back({local, t});
  }
  return local;
}

ValueId LocalGraph::first_local_at(ValueId start) const {
  ValueId first = graph.size();
  for (ValueId g = start; g < static_cast<ValueId>(first_local_of.size()); ++g)
    if (first_local_of[g] >= 0) first = std::min<ValueId>(first, first_local_of[g]);
  return first;
}

LocalGraph lower_to_rank(const Graph& global, const std::vector<ValueId>& outputs, const Mesh& mesh,
                         const Layout& layout, int rank, const LoweringOptions& options) {
  return Lowering(global, mesh, layout, rank, options).run(outputs);
}

}  // namespace tessel
