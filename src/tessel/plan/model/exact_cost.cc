#include "tessel/plan/model/exact_cost.h"

#include "tessel/schedule/schedule.h"

namespace tessel::plan {
namespace {

// A synchronous pipeline whose stages gpipe and 1f1b share (zb-h1 splits
// its backward into two phases: its own stage programs).
bool shares_stages(const TrainConfig& c) {
  return c.mesh.find("pipe=") != std::string::npos && c.chunks == 1 &&
         (c.schedule == "gpipe" || c.schedule == "1f1b");
}

}  // namespace

ExactCoster::Kept& ExactCoster::kept(const TrainConfig& key, const std::vector<int>& reps,
                                     GraphCache* graphs) {
  const std::string k = key.to_json().dump();
  auto it = kept_.find(k);
  if (it == kept_.end()) it = kept_.emplace(k, Kept{compile_ranks(key, reps, graphs), {}}).first;
  return it->second;
}

StepPrediction ExactCoster::cost(const TrainConfig& config) {
  const Mesh mesh = Mesh::parse(config.mesh);
  const std::vector<int> reps = representative_ranks(mesh, false);
  // Without shared compiles, every compile builds its graphs (the reference path).
  GraphCache* shared_graphs = share_ ? &graphs_ : nullptr;
  if (share_ && kept_mesh_ != config.mesh) kept_.clear(), kept_mesh_ = config.mesh;
  const bool shared = shares_stages(config);
  if (share_ && uses_pipeline(config, mesh)) {
    // Compiled once as 1f1b (where the stages are shared) under ZeRO 0,
    // then pointed at the candidate's ZeRO stage.
    TrainConfig key = config;
    if (shared) key.schedule = "1f1b";
    key.zero = 0;
    Kept& k = kept(key, reps, &graphs_);
    for (CompiledRank& c : k.ranks) {
      c.pipeline->set_zero(config.zero);
      c.config.zero = config.zero;
    }
    if (!shared) return predict_compiled(k.ranks, hw_, options_, nullptr, &k.phases);
    const Schedule schedule =
        make_schedule(config.schedule, k.ranks.front().pipeline->schedule().ranks,
                      static_cast<int>(config.microbatches));
    return predict_compiled(k.ranks, hw_, options_, &schedule, &k.phases);
  }
  if (shared) {
    TrainConfig key = config;
    key.schedule = "1f1b";
    const Kept& k = kept(key, reps, shared_graphs);
    const Schedule schedule =
        make_schedule(config.schedule, k.ranks.front().pipeline->schedule().ranks,
                      static_cast<int>(config.microbatches));
    return predict_compiled(k.ranks, hw_, options_, &schedule);
  }
  if (share_ && (config.zero == 1 || config.zero == 2)) {
    // ZeRO 1 and 2 lower a single program alike (zero_targets: both
    // reduce-scatter the gradients): compiled as ZeRO 1, re-pointed.
    TrainConfig key = config;
    key.zero = 1;
    Kept& k = kept(key, reps, &graphs_);
    for (CompiledRank& c : k.ranks) c.config.zero = config.zero;
    return predict_compiled(k.ranks, hw_, options_, nullptr);
  }
  return predict_step(config, reps, hw_, options_, shared_graphs);
}

}  // namespace tessel::plan
