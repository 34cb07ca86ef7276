#include "tessel/train/memory_report.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "tessel/runtime/program.h"
#include "tessel/sharding/lower.h"
#include "tessel/train/task.h"
#include "tessel/train/trainer.h"

namespace tessel {

std::vector<RankMemory> predict_memory(const TrainConfig& c) {
  TrainingGraph t = build_training_graph(c, c.batch);
  Mesh mesh = Mesh::parse(c.mesh);
  Layout layout = c.layout.empty() ? Layout::defaults(mesh) : Layout::parse(c.layout, mesh);
  for (const auto& [label, spec] : c.shard) layout.set_override(label, spec, mesh);
  layout.validate(t.graph, mesh);
  std::map<ValueId, Sharding> targets = zero_gradient_targets(t, layout, mesh, c.zero);
  std::vector<ValueId> outputs = {t.outputs.loss};
  outputs.insert(outputs.end(), t.grads.begin(), t.grads.end());
  Graph eval;
  GraphBuilder eb(eval);
  TaskGraph eval_out = build_model(c, eb, c.batch, /*training=*/false);
  const std::vector<ValueId> eval_outputs = {eval_out.loss, eval_out.logits};
  auto planned_arena = [](const LocalGraph& local, const std::vector<ValueId>& outputs) {
    std::vector<ValueId> local_outputs;
    for (ValueId v : outputs) local_outputs.push_back(local.local_of[v]);
    CompileOptions options;
    options.plan_only = true;
    return static_cast<int64_t>(Program(local.graph, local_outputs, options).arena_bytes());
  };
  std::vector<RankMemory> ranks;
  for (int r = 0; r < mesh.rank_count(); ++r) {
    LocalGraph local = lower_to_rank(t.graph, outputs, mesh, layout, r, targets);
    RankMemory m;
    m.rank = r;
    m.arena = planned_arena(local, outputs);
    m.eval_arena = planned_arena(lower_to_rank(eval, eval_outputs, mesh, layout, r), eval_outputs);
    for (size_t i = 0; i < t.graph.params().size(); ++i) {
      ValueId p = t.graph.params()[i];
      const Shape& global = t.graph.node(p).shape;
      m.parameters += local.sharding_of[p].local_shape(global, mesh).numel() * 4;
      const int64_t state = local.sharding_of[t.grads[i]].local_shape(global, mesh).numel() * 4;
      m.gradients += state;
      if (c.optimizer == "adamw") m.optimizer += 2 * state;
    }
    ranks.push_back(m);
  }
  return ranks;
}

int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream in(line.substr(6));
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
  return -1;
}

std::string format_bytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  return buf;
}

}  // namespace tessel
