#include "tessel/passes/recompute.h"

#include <algorithm>
#include <map>

#include "tessel/base/error.h"
#include "tessel/ir/graph_copy.h"

namespace tessel {
namespace {

class Recomputer {
 public:
  Recomputer(const Graph& g, int forward_end, const SegmentFn& segment_of)
      : g_(g), segment_(g.size(), -1), clone_(g.size(), -1), scratch_(g.size(), -1) {
    TS_CHECK(forward_end >= 0 && forward_end <= g.size(), "recompute: forward end ", forward_end,
             " outside a graph of ", g.size(), " nodes");
    std::map<std::string, int> index;
    for (ValueId id = 0; id < forward_end; ++id) {
      const Node& n = g.node(id);
      if (is_leaf(n)) continue;
      const std::string s = segment_of(g, n);
      if (!s.empty()) segment_[id] = index.emplace(s, static_cast<int>(index.size())).first->second;
    }
    recomputed_.assign(index.size(), false);
    r_.remap.assign(g.size(), -1);
    for (ValueId id = 0; id < g.size(); ++id) {
      const Node& n = g.node(id);
      if (id < forward_end || is_leaf(n)) {
        r_.remap[id] = copy_node(r_.graph, n, r_.remap);
        continue;
      }
      // A backward node: values computed inside a segment come from their clones.
      for (ValueId in : n.inputs) {
        if (segment_[in] >= 0) recompute(in);
        scratch_[in] = segment_[in] >= 0 ? clone_[in] : r_.remap[in];
      }
      r_.remap[id] = copy_node(r_.graph, n, scratch_);
    }
    for (bool used : recomputed_) r_.segments += used;
  }

  RecomputeResult take() { return std::move(r_); }

 private:
  // Clones `value` and its not yet cloned ancestors within its segment, in
  // forward order; ancestors outside the segment are read stored.
  void recompute(ValueId value) {
    if (clone_[value] >= 0) return;
    const int s = segment_[value];
    std::vector<ValueId> todo, stack = {value};
    std::vector<bool> seen(value + 1, false);
    seen[value] = true;
    while (!stack.empty()) {
      ValueId v = stack.back();
      stack.pop_back();
      todo.push_back(v);
      for (ValueId in : g_.node(v).inputs)
        if (segment_[in] == s && clone_[in] < 0 && !seen[in]) {
          seen[in] = true;
          stack.push_back(in);
        }
    }
    std::sort(todo.begin(), todo.end());  // ids are a topological order
    for (ValueId v : todo) {
      for (ValueId in : g_.node(v).inputs)
        scratch_[in] = segment_[in] == s ? clone_[in] : r_.remap[in];
      clone_[v] = copy_node(r_.graph, g_.node(v), scratch_);
      r_.clones.push_back(clone_[v]);
      r_.recomputed_flops += r_.graph.node_flops(clone_[v]);
    }
    recomputed_[s] = true;
  }

  const Graph& g_;
  std::vector<int> segment_;      // forward node -> segment index, or -1 (stored)
  std::vector<ValueId> clone_;    // forward node -> its clone in the new graph, or -1
  std::vector<ValueId> scratch_;  // the input map handed to copy_node
  std::vector<bool> recomputed_;  // per segment
  RecomputeResult r_;
};

}  // namespace

RecomputeResult recompute_segments(const Graph& graph, int forward_end,
                                   const SegmentFn& segment_of) {
  return Recomputer(graph, forward_end, segment_of).take();
}

}  // namespace tessel
