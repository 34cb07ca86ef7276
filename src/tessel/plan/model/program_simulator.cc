#include "tessel/plan/model/program_simulator.h"

namespace tessel::plan {

RankStep single_program_step(const CompiledRank& c, const Simulator& sim) {
  RankStep r;
  const ProgramTime t = sim.run(*c.train.program);
  for (double s : t.compute_s) r.compute_s += s;
  for (const auto& phase : t.blocking_s)
    for (const auto& [axis, s] : phase) r.expose(axis, s);
  for (const auto& [axis, s] : t.bucket_s) r.comm_s[axis] += s;
  for (const auto& [axis, s] : t.bucket_exposed_s) r.exposed_s[axis] += s;
  // Feeding this rank's block of the batch.
  double feed = 0;
  for (ValueId id : c.train.global.inputs())
    feed += 2 * value_bytes(c.train.local.graph, c.train.local.local_of[id]);
  r.compute_s += sim.memory(feed);
  // The update over this rank's state (ZeRO: its flat chunks), and the
  // ZeRO gathers of the updated chunks (exposed communication on the data
  // axis, not optimizer time: each part of the step is counted once).
  const Graph& g = c.train.global;
  double state = 0, gathers = 0;
  const int zero_axis = c.config.zero > 0 ? c.layout.zero_axis() : -1;
  for (ValueId p : g.params()) {
    const Shape& shape = g.node(p).shape;
    const Sharding& value = c.train.local.sharding_of[p];
    const int64_t held = value.local_shape(shape, c.mesh).numel();
    // A parameter ZeRO-3 stores as its shard is updated whole (compile/zero.h).
    const std::optional<FlatShard> zero = zero_axis >= 0 && !value[zero_axis].is_split()
                                              ? flat_shard(held, c.mesh, zero_axis)
                                              : std::nullopt;
    const int64_t n = zero ? zero->chunk() : held;
    state += static_cast<double>(n);
    if (zero) {
      const std::string& axis = c.mesh.axis(zero_axis).name;
      gathers += r.expose(
          axis, sim.collective(CollectiveKind::kAllGather, 4.0 * n, axis) + sim.memory(8.0 * n));
    }
  }
  r.optimizer_s = sim.update(state, c.config);
  r.end_s = t.end_s + sim.memory(feed) + gathers + r.optimizer_s;
  return r;
}

std::vector<StagePhaseCost> phase_costs(const CompiledRank& c, const Simulator& sim) {
  std::vector<StagePhaseCost> out;
  for (const PipelineStage& st : c.pipeline->compiled_stages()) {
    const Program& prog = *st.instances.front();
    const ProgramTime t = sim.run(prog);
    StagePhaseCost sc;
    sc.chunk = st.chunk;
    sc.f = t.phase_s(0);
    const size_t phases = t.compute_s.size();
    sc.bi = phases > 1 ? t.phase_s(1) : 0;
    sc.bw = phases > 2 ? t.phase_s(2) : 0;
    double grads = 0;
    for (ValueId v : st.param_grads) grads += value_bytes(prog.graph(), v);
    sc.accumulate = sim.memory(3 * grads);  // into the stage's accumulators
    sc.param_grad_bytes = grads;
    sc.weight_copies = sim.host_reads(static_cast<double>(prog.shared_copy_read_bytes()));
    for (ValueId v : st.activations_out) sc.act_bytes += value_bytes(prog.graph(), v);
    for (ValueId v : st.gradients_out) sc.grad_bytes += value_bytes(prog.graph(), v);
    for (int ph = 0; ph < static_cast<int>(t.blocking_s.size()); ++ph)
      for (const auto& [axis, s] : t.blocking_s[ph]) (ph == 0 ? sc.comm_f : sc.comm_b)[axis] += s;
    sc.poll_interval = (sc.f + sc.bi + sc.bw + sc.accumulate) / std::max(1, t.polls);
    out.push_back(sc);
  }
  return out;
}

}  // namespace tessel::plan
