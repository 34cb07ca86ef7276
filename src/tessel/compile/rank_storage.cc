#include "tessel/compile/rank_storage.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"
#include "tessel/ir/op_table.h"

namespace tessel {

namespace {

// Ranks holding the same copy of a tensor with sharding `s`: the sizes of
// the axes it is not split on, the pipe axis (`skip`) left out.
double copies_on_mesh(const Sharding& s, const Mesh& mesh, std::optional<int> skip) {
  double copies = 1;
  for (int a = 0; a < s.axis_count(); ++a)
    if (a != skip && !s[a].is_split()) copies *= mesh.axis(a).size;
  return copies;
}

StoredParam stored(const std::string& name, const Shape& shape, const ParamInit& init,
                   const Sharding& value, const Sharding& state, std::optional<FlatShard> zero,
                   std::vector<int> pipe_ranks, bool held, const Mesh& mesh,
                   std::optional<int> pipe_axis) {
  StoredParam p;
  p.name = name, p.shape = shape, p.init = init, p.value = value, p.state = state;
  p.zero = zero, p.pipe_ranks = std::move(pipe_ranks), p.held = held;
  if (held) {
    p.value_numel = value.local_numel(shape, mesh);
    p.state_numel = zero ? zero->chunk() : state.local_numel(shape, mesh);
  }
  // Each data rank's chunk is distinct: the data axis holds no copies of it.
  p.replicas = copies_on_mesh(state, mesh, pipe_axis) / (zero ? zero->ranks : 1) *
               static_cast<double>(p.pipe_ranks.size());
  return p;
}

// The host buffers a flat ZeRO shard needs: its chunk goes to the parameter
// all-gather, and its padded block pads a block the data size does not
// divide and (`moments`: a single program's AdamW) gathers the moments for
// checkpoints (a pipeline gathers them into the idle accumulators).
void add_zero_buffers(const StoredParam& p, bool moments, RankStorage& s) {
  if (!p.zero || !p.held) return;
  s.zero_slice = std::max(s.zero_slice, p.zero->chunk() * 4);
  if (moments || p.zero->padded() != p.zero->block)
    s.zero_block = std::max(s.zero_block, p.zero->padded() * 4);
}

// The ids `in` may hold, from the ops that read it (through views): an
// embedding's table rows, a loss's classes; the smallest where several do.
void set_id_limit(const Graph& g, ValueId id, StagedInput& in) {
  std::set<ValueId> values = {id};  // the input and its views
  for (ValueId v = id + 1; v < g.size(); ++v) {
    const Node& n = g.node(v);
    const bool reads = std::any_of(n.inputs.begin(), n.inputs.end(),
                                   [&](ValueId x) { return values.count(x) > 0; });
    if (!reads) continue;
    if (op_info(n.kind).is_view()) values.insert(v);
    const ValueId limited = n.kind == OpKind::kLinearCrossEntropy ? n.inputs[1] : n.inputs[0];
    const bool ids = (n.kind == OpKind::kEmbedding || n.kind == OpKind::kCrossEntropy ||
                      n.kind == OpKind::kLinearCrossEntropy) &&
                     values.count(n.inputs.back()) > 0;
    const int64_t limit = ids ? g.node(limited).shape.size(n.attrs.dim) : 0;
    if (limit > 0 && (in.id_limit == 0 || limit < in.id_limit))
      in.id_limit = limit, in.id_reader = str_cat(op_name(n.kind), " '", n.name, "'");
  }
}

void add_inputs(const Graph& g, RankStorage& s) {
  for (ValueId id : g.inputs()) {
    const Node& n = g.node(id);
    s.inputs.push_back({n.name, n.shape, n.dtype, 0, ""});
    if (n.dtype == DType::kI32) set_id_limit(g, id, s.inputs.back());
    s.input_staging += s.inputs.back().bytes();
  }
}

// The full-batch inputs of the config's model, as add_inputs finds them
// in build_model(config, batch, training): a pipeline's staging buffers.
// Building the whole model for its inputs cost the planner a model build
// per representative rank and candidate, so the inputs of the last
// configs are kept, keyed by the whole config (a registered model may read
// any key) but for the parallel knobs: the mesh, layout, schedule, chunks,
// stage boundaries, micro-batches, ZeRO stage and recompute policy. A
// model's global graph does not depend on them (they are applied to it:
// lowering, pipeline partition, recompute pass; the global graph is the
// same for every layout, the layout-invariance contract), so equal keys
// build models with equal inputs, and the planner's candidates, which
// differ only in those knobs, share one entry.
nlohmann::json staged_inputs_key(TrainConfig config) {
  config.mesh.clear();
  config.layout.clear();
  config.shard.clear();
  config.schedule.clear();
  config.chunks = 1;
  config.stages.clear();
  config.microbatches = 1;
  config.zero = 0;
  config.recompute.clear();
  return config.to_json();  // compared as JSON values (no text made)
}

void add_staged_inputs(const TrainConfig& config, RankStorage& s) {
  static std::mutex mutex;
  static std::deque<std::pair<nlohmann::json, RankStorage>> kept;  // (config, its inputs)
  constexpr size_t kKept = 16;
  const nlohmann::json key = staged_inputs_key(config);
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [k, inputs] : kept)
      if (k == key) {
        s.inputs.insert(s.inputs.end(), inputs.inputs.begin(), inputs.inputs.end());
        s.input_staging += inputs.input_staging;
        return;
      }
  }
  Graph g;
  GraphBuilder b(g);
  build_model(config, b, config.batch, /*training=*/true);
  RankStorage inputs;
  add_inputs(g, inputs);
  s.inputs.insert(s.inputs.end(), inputs.inputs.begin(), inputs.inputs.end());
  s.input_staging += inputs.input_staging;
  std::lock_guard<std::mutex> lock(mutex);
  kept.emplace_back(key, std::move(inputs));
  if (kept.size() > kKept) kept.pop_front();
}

// A single program: every parameter held, the state sharding is its gradient's.
RankStorage program_storage(const CompiledRank& c) {
  RankStorage s;
  const Graph& g = c.train.global;
  const bool moments = c.config.optimizer == "adamw";
  const int data = c.config.zero > 0 ? c.layout.zero_axis() : -1;
  for (size_t i = 0; i < g.params().size(); ++i) {
    const Node& n = g.node(g.params()[i]);
    const Sharding& value = c.train.local.sharding_of[g.params()[i]];
    const Sharding& grad = c.train.local.sharding_of[c.grads[i]];
    // ZeRO-3 stores a parameter as its data-axis shard: its state is that
    // shard. Every other parameter's state is a flat chunk (compile/zero.h).
    const bool stored_sharded = data >= 0 && value[data].is_split();
    const std::optional<FlatShard> zero =
        stored_sharded ? std::nullopt
                       : flat_shard(value.local_numel(n.shape, c.mesh), c.mesh, data);
    s.params.push_back(stored(n.name, n.shape, n.init, value, stored_sharded ? grad : value, zero,
                              {0}, true, c.mesh, std::nullopt));
    StoredParam& p = s.params.back();
    p.grad_is_chunk = zero && grad[data].is_split();
    TS_CHECK(!p.grad_is_chunk || grad.local_numel(n.shape, c.mesh) == zero->chunk(),
             "ZeRO: the gradient shard of '", n.name, "' is not its flat chunk");
    const int64_t whole = p.shape.numel() * 4;
    // A ZeRO chunk is updated apart and sent to the all-gather; a sharded
    // value (or moment) goes whole through one buffer at initialisation and
    // checkpoints.
    add_zero_buffers(p, moments, s);
    if (!p.whole() || (moments && (p.zero || p.state_numel != p.shape.numel())))
      s.full_tensor = std::max(s.full_tensor, whole);
  }
  add_inputs(g, s);
  return s;
}

RankStorage pipeline_storage(const CompiledRank& c) {
  RankStorage s;
  const PipelineModel& model = *c.pipeline;
  s.params.reserve(model.params().size());
  int64_t largest = 1;
  for (const PipelineParam& pp : model.params()) {
    s.params.push_back(stored(pp.name, pp.shape, pp.init, pp.sharding, pp.sharding, pp.zero,
                              pp.pipe_ranks, pp.held, c.mesh, model.pipe_axis()));
    const StoredParam& p = s.params.back();
    largest = std::max(largest, p.shape.numel());
    if (p.pipe_ranks.size() > 1)  // counted on every rank: one joins each tie sum
      s.tie_scratch_elements =
          std::max(s.tie_scratch_elements, p.value.local_numel(p.shape, c.mesh));
    if (!p.held) continue;
    s.accumulator_elements += p.value_numel;
    if (p.zero) s.zero_gradient_elements += p.zero->chunk();
    add_zero_buffers(p, /*moments=*/false, s);
  }
  s.tie_scratch_elements = std::max<int64_t>(s.tie_scratch_elements, 1);
  // Checkpoints gather every parameter through one buffer on every rank.
  s.full_tensor = largest * 4;
  add_staged_inputs(c.config, s);
  return s;
}

}  // namespace

int64_t RankStorage::value_bytes() const {
  int64_t n = 0;
  for (const StoredParam& p : params) n += p.value_numel * 4;
  return n;
}

int64_t RankStorage::state_bytes() const {
  int64_t n = 0;
  for (const StoredParam& p : params) n += p.state_numel * 4;
  return n;
}

int64_t RankStorage::gradient_bytes() const {
  int64_t n = 0;
  for (const StoredParam& p : params) n += p.gradient_numel() * 4;
  return n;
}

RankStorage rank_storage(const CompiledRank& compiled) {
  RankStorage s = compiled.pipelined() ? pipeline_storage(compiled) : program_storage(compiled);
  if (offloads(compiled.config, "optimizer")) {
    for (const StoredParam& p : s.params)  // an update slot: the ZeRO chunk, or the local value
      s.offload_staging_elements =
          std::max(s.offload_staging_elements, p.zero ? p.state_numel : p.value_numel);
    s.offload_staging_buffers = offloads(compiled.config, "weights") ? 1 : 2;
  }
  return s;
}

}  // namespace tessel
