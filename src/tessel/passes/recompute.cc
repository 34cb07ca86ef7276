#include "tessel/passes/recompute.h"

#include <map>

#include "tessel/base/error.h"
#include "tessel/ir/graph_copy.h"

namespace tessel {
namespace {

// "block12.attn.q" -> "block12" for prefix "block"; "" otherwise.
std::string segment_of(const std::string& label, const std::string& prefix) {
  if (label.rfind(prefix, 0) != 0) return "";
  size_t i = prefix.size();
  while (i < label.size() && std::isdigit(static_cast<unsigned char>(label[i]))) ++i;
  if (i == prefix.size() || i >= label.size() || label[i] != '.') return "";
  return label.substr(0, i);
}

}  // namespace

RecomputeResult recompute_segments(const Graph& g, int forward_end, const std::string& prefix) {
  RecomputeResult r;
  r.remap.assign(g.size(), -1);
  std::vector<std::string> segment(g.size());
  std::map<std::string, std::vector<ValueId>> members;
  for (ValueId id = 0; id < forward_end; ++id) {
    const Node& n = g.node(id);
    if (n.kind == OpKind::kInput || n.kind == OpKind::kParam) continue;
    segment[id] = segment_of(n.name, prefix);
    if (!segment[id].empty()) members[segment[id]].push_back(id);
  }
  std::map<std::string, std::vector<ValueId>> clone_of;  // segment -> old id -> clone id
  for (ValueId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (id < forward_end || n.kind == OpKind::kInput || n.kind == OpKind::kParam) {
      r.remap[id] = copy_node(r.graph, n, r.remap);
      continue;
    }
    // A backward node: segment-internal inputs come from the segment's clone.
    std::vector<ValueId> map = r.remap;
    for (ValueId in : n.inputs) {
      const std::string& s = in < forward_end ? segment[in] : std::string();
      if (s.empty()) continue;
      auto it = clone_of.find(s);
      if (it == clone_of.end()) {
        std::vector<ValueId> clone = r.remap;  // outside the segment: the stored values
        for (ValueId m : members[s]) clone[m] = copy_node(r.graph, g.node(m), clone);
        it = clone_of.emplace(s, std::move(clone)).first;
        ++r.segments;
      }
      map[in] = it->second[in];
    }
    r.remap[id] = copy_node(r.graph, n, map);
  }
  return r;
}

}  // namespace tessel
