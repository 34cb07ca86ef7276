#include "tessel/compile/zero.h"

#include "tessel/base/error.h"
#include "tessel/ir/model_contract.h"

namespace tessel {

std::optional<FlatShard> flat_shard(int64_t block, const Mesh& mesh, int data_axis) {
  if (data_axis < 0 || mesh.axis(data_axis).size < 2) return std::nullopt;
  return FlatShard{data_axis, mesh.axis(data_axis).size, block};
}

std::optional<Sharding> zero_sharding(const Node& param, const Layout& layout, const Mesh& mesh,
                                      int data_axis) {
  Sharding s = layout.target(param.shape, param.name, mesh);
  const Dim& lead = param.shape[0];
  if (s.axis_of(lead.name) >= 0 || s[data_axis].is_split()) return std::nullopt;
  if (s.local_shape(param.shape, mesh)[0].size % mesh.axis(data_axis).size != 0)
    return std::nullopt;
  return s.with(data_axis, Placement::split(lead.name));
}

std::map<ValueId, Sharding> zero_targets(const Graph& graph, const std::vector<ValueId>& grads,
                                         const Layout& layout, const Mesh& mesh, int zero) {
  std::map<ValueId, Sharding> targets;
  if (zero == 0) return targets;
  const int axis = layout.zero_axis();
  if (axis < 0)
    TS_THROW("config: 'zero' ", zero,
             " shards over the data-parallel axis (or, without one, a context-parallel axis), but "
             "the layout maps 'batch' to no mesh axis and 'seq' to none of its own");
  const std::vector<ValueId>& params = graph.params();
  TS_CHECK(grads.empty() || grads.size() == params.size(), "one gradient per parameter");
  for (size_t i = 0; i < params.size(); ++i) {
    std::optional<Sharding> s = zero_sharding(graph.node(params[i]), layout, mesh, axis);
    if (!s) continue;
    if (!grads.empty()) targets[grads[i]] = *s;
    if (zero == 3) targets[params[i]] = *s;
  }
  return targets;
}

}  // namespace tessel
