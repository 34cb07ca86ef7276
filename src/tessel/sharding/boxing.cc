#include "tessel/sharding/boxing.h"

#include <algorithm>

#include "tessel/base/error.h"

namespace tessel {
namespace {

// Order in which per-axis steps run: cheap and shrinking first.
int step_rank(OpKind op) {
  const OpKind order[] = {OpKind::kShardSlice, OpKind::kReduceScatter, OpKind::kAllReduce,
                          OpKind::kAllToAll, OpKind::kAllGather};
  return static_cast<int>(std::find(std::begin(order), std::end(order), op) - std::begin(order));
}

OpKind op_for(const Placement& from, const Placement& to, const std::string& axis) {
  using K = Placement::Kind;
  if (from.is_partial()) {
    if (to.kind == K::kBroadcast) return OpKind::kAllReduce;
    if (to.is_split() && from.kind == K::kPartialSum) return OpKind::kReduceScatter;
  } else if (from.kind == K::kBroadcast) {
    if (to.is_split()) return OpKind::kShardSlice;
    if (to.kind == K::kPartialSum) return OpKind::kZeroUnlessRoot;
  } else {  // split
    if (to.kind == K::kBroadcast) return OpKind::kAllGather;
    if (to.is_split()) return OpKind::kAllToAll;
  }
  TS_THROW("boxing: no transition from ", from.to_string(), " to ", to.to_string(),
           " on mesh axis '", axis, "'");
}

}  // namespace

double transition_bytes(const Placement& from, const Placement& to, double bytes, int n) {
  if (from == to || n == 1) return 0;
  using K = Placement::Kind;
  double part = (n - 1.0) / n;
  if (from.is_partial()) return to.kind == K::kBroadcast ? 2 * bytes * part : bytes * part;
  if (from.kind == K::kBroadcast) return 0;
  if (to.kind == K::kBroadcast) return bytes * n * part;  // gather: receive the other shards
  if (to.is_split()) return bytes * part;                 // all-to-all
  return bytes * n * part;                                // S -> P goes through B
}

std::vector<Transition> plan_boxing(const Shape& global, const Sharding& from, const Sharding& to,
                                    const Mesh& mesh) {
  struct Step {
    int axis;
    Placement from, to;
    OpKind op;
  };
  std::vector<Step> steps;
  for (int a = 0; a < from.axis_count(); ++a) {
    const Placement& f = from[a];
    const Placement& t = to[a];
    if (f == t || mesh.axis(a).size == 1) continue;
    if (f.is_split() && t.kind == Placement::kPartialSum) {
      steps.push_back({a, f, Placement::broadcast(), OpKind::kAllGather});
      steps.push_back({a, Placement::broadcast(), t, OpKind::kZeroUnlessRoot});
      continue;
    }
    steps.push_back({a, f, t, op_for(f, t, mesh.axis(a).name)});
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step& x, const Step& y) { return step_rank(x.op) < step_rank(y.op); });
  // Splits of one dim stay nested in mesh order (placement.h): a step that
  // splits d on axis a waits while another axis splits d that is after a or
  // will not split d at the end (a slice before that axis has gathered d
  // would cut the wrong rows), and a step that unsplits d on a waits while
  // an axis after a still cuts d's pieces. Take, in the order above, the
  // first step that may run now; only a cycle (two dims trading axes)
  // leaves none.
  std::vector<Transition> plan;
  Sharding current = from;
  auto blocked = [&](const Step& s) {
    if (s.from.is_split() && current.split_after(s.from.dim, s.axis)) return true;
    if (!s.to.is_split()) return false;
    for (int b = 0; b < current.axis_count(); ++b)
      if (b != s.axis && current[b] == s.to && (b > s.axis || !(to[b] == s.to))) return true;
    return false;
  };
  while (!steps.empty()) {
    auto next =
        std::find_if(steps.begin(), steps.end(), [&](const Step& s) { return !blocked(s); });
    if (next == steps.end())
      TS_THROW("boxing ", from.to_string(), " -> ", to.to_string(), ": dim '", steps[0].to.dim,
               "' would be split on two axes out of mesh order");
    const Step s = *next;
    steps.erase(next);
    double local_bytes = current.local_shape(global, mesh).numel() * 4.0;
    Sharding after = current.with(s.axis, s.to);
    plan.push_back({s.axis, s.from, s.to, s.op,
                    transition_bytes(s.from, s.to, local_bytes, mesh.axis(s.axis).size), after});
    current = after;
  }
  return plan;
}

}  // namespace tessel
