#include "tessel/compile/pipeline_model.h"

#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/model_registry.h"
#include "tessel/compile/zero.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"
#include "tessel/schedule/schedule_check.h"

namespace tessel {
namespace {

bool is_pipe_value(const std::string& name) { return name.rfind(kPipeValuePrefix, 0) == 0; }

// Forward-only action list: each stage in turn receives, runs and sends.
Schedule forward_only_schedule(int ranks, int chunks) {
  Schedule s{.name = "forward",
             .ranks = ranks,
             .chunks = chunks,
             .actions = std::vector<std::vector<Action>>(ranks)};
  for (int r = 0; r < ranks; ++r)
    for (int c = 0; c < chunks; ++c) {
      const int k = c * ranks + r;
      if (k > 0) s.actions[r].push_back({ActionKind::kRecvActivation, 0, c, (k - 1) % ranks});
      s.actions[r].push_back({ActionKind::kForward, 0, c, -1});
      if (k < s.stages() - 1)
        s.actions[r].push_back({ActionKind::kSendActivation, 0, c, (k + 1) % ranks});
    }
  return s;
}

// The model, partition and stage graphs of `config` (stage_count stages).
std::shared_ptr<PipelineGraphs> build_pipeline_graphs(const TrainConfig& config, int stage_count,
                                                      bool split_weight_phase) {
  auto pg = std::make_shared<PipelineGraphs>();
  const int m = static_cast<int>(config.microbatches);
  Graph eval_forward;
  GraphBuilder fb(pg->forward), eb(eval_forward);
  const TaskGraph train_out = build_model(config, fb, config.batch / m, /*training=*/true);
  // Evaluation runs the batch in the training's micro-batches, one at a
  // time (PipelineModel::evaluate): its arena is one micro-batch's forward.
  const TaskGraph eval_out = build_model(config, eb, config.batch / m, /*training=*/false);
  std::vector<int> boundaries(config.stages.begin(), config.stages.end());
  pg->partition = partition_stages(pg->forward, stage_count, boundaries);
  std::vector<int> chosen(pg->partition.first_block.begin() + 1, pg->partition.first_block.end());
  StagePartition eval_partition = partition_stages(eval_forward, stage_count, chosen);
  pg->train = build_stage_graphs(pg->forward, train_out.loss, pg->partition,
                                 {true, m, config.recompute, split_weight_phase});
  pg->eval = build_stage_graphs(eval_forward, eval_out.loss, eval_partition, {false, 1, ""},
                                eval_out.logits);
  for (const StageGraph& g : pg->train) {
    pg->flops_per_step += m * g.graph.flops(std::vector<bool>(g.graph.size(), true));
    int64_t n = 0;
    for (ValueId p : g.graph.params()) n += g.graph.node(p).shape.numel();
    pg->stage_parameters.push_back(n);
  }
  return pg;
}

std::string pipeline_graphs_key(const TrainConfig& config, int stage_count,
                                bool split_weight_phase) {
  std::string key = str_cat(config.recompute, "|", config.batch, "|", config.microbatches, "|",
                            stage_count, "|", split_weight_phase, "|");
  for (int64_t b : config.stages) key += str_cat(b, ",");
  return key;
}

// The stage graphs of `config`: shared with other compiles of it through
// `cache`, else built here into `owned` (moved into this rank's stages).
std::shared_ptr<const PipelineGraphs> pipeline_graphs(const TrainConfig& config, int stage_count,
                                                      bool split_weight_phase,
                                                      PipelineGraphCache* cache,
                                                      std::shared_ptr<PipelineGraphs>& owned) {
  if (!cache) {
    owned = build_pipeline_graphs(config, stage_count, split_weight_phase);
    return owned;
  }
  std::shared_ptr<const PipelineGraphs>& slot =
      cache->graphs[pipeline_graphs_key(config, stage_count, split_weight_phase)];
  if (!slot) slot = build_pipeline_graphs(config, stage_count, split_weight_phase);
  return slot;
}

// What a stage's evaluation arena depends on: a plan-only compile with a
// cache takes the arena of an earlier compile of the same stage on the same
// block of the same mesh.
std::string eval_arena_key(const TrainConfig& config, int stage, int stage_count,
                           const Mesh& stage_mesh, int stage_rank,
                           const StagePartition& partition) {
  std::string key = str_cat(config.batch / config.microbatches, "|", stage, "|", stage_count, "|",
                            stage_mesh.to_string(), "|", stage_rank, "|", config.layout, "|",
                            config.precision, "|", config.bf16_activations, "|",
                            config.tp_comm_precision, "|", config.bucket_mib, "|");
  for (int b : partition.first_block) key += str_cat(b, ",");
  for (const auto& [label, spec] : config.shard) key += str_cat("|", label, "=", spec);
  key += "|" + config.context_parallel;
  return key;
}

// Lowers a stage's training graph (and its evaluation graph, `with_eval`)
// to this stage rank, its boundary values laid out as the layout says.
void lower_stage(PipelineModel::LocalStage& st, bool with_eval, const Layout& layout,
                 const Mesh& mesh, int stage_rank) {
  const int data = layout.axis_of(kBatchDim);
  const Graph& g = st.graph.graph;
  std::map<ValueId, Sharding> targets;
  // Gradients stay partial over data: micro-batches add up locally first.
  for (size_t i = 0; i < g.params().size(); ++i) {
    const Node& p = g.node(g.params()[i]);
    Sharding t = layout.target(p.shape, p.name, mesh);
    if (data >= 0 && !t[data].is_split()) t = t.with(data, Placement::partial_sum());
    targets[st.graph.param_grads[i]] = t;
  }
  auto boundary_targets = [&](const StageGraph& sg, std::map<ValueId, Sharding>& out) {
    for (size_t i = 0; i < sg.activations_out.size(); ++i)
      out[sg.activations_out[i]] =
          layout.target(sg.graph.node(sg.activations_out[i]).shape, sg.out_names[i], mesh);
    for (size_t i = 0; i < sg.gradients_out.size(); ++i) {
      const Node& in = sg.graph.node(sg.activations_in[i]);
      std::string seed = kPipeGradientPrefix + in.name.substr(kPipeActivationPrefix.size());
      out[sg.gradients_out[i]] = layout.target(in.shape, seed, mesh);
    }
  };
  boundary_targets(st.graph, targets);
  std::vector<ValueId> outputs = st.graph.activations_out;
  outputs.insert(outputs.end(), st.graph.gradients_out.begin(), st.graph.gradients_out.end());
  outputs.insert(outputs.end(), st.graph.param_grads.begin(), st.graph.param_grads.end());
  if (st.graph.loss) outputs.push_back(*st.graph.loss);
  st.local = lower_to_rank(g, outputs, mesh, layout, stage_rank, {targets});
  if (!with_eval) return;
  std::map<ValueId, Sharding> eval_targets;
  boundary_targets(st.eval_graph, eval_targets);
  std::vector<ValueId> eval_outputs = st.eval_graph.activations_out;
  if (st.eval_graph.loss) eval_outputs.push_back(*st.eval_graph.loss);
  if (st.eval_graph.logits) eval_outputs.push_back(*st.eval_graph.logits);
  st.eval_local =
      lower_to_rank(st.eval_graph.graph, eval_outputs, mesh, layout, stage_rank, {eval_targets});
}

}  // namespace

bool uses_pipeline(const TrainConfig& config, const Mesh& mesh) {
  return mesh.axis_index(kPipeAxis) >= 0 || config.microbatches > 1;
}

Sharding PipelineModel::on_full_mesh(const Sharding& s) const {
  if (!pipe_axis_) return s;
  std::vector<Placement> p = s.placements();
  p.insert(p.begin() + *pipe_axis_, Placement::broadcast());
  return Sharding(p);
}

PipelineModel::PipelineModel(const TrainConfig& config, DistributedContext& ctx, bool plan_only)
    : PipelineModel(config, ctx.mesh(), ctx.rank(), &ctx, plan_only) {}

PipelineModel::PipelineModel(const TrainConfig& config, const Mesh& mesh, int rank,
                             DistributedContext* ctx, bool plan_only, PipelineGraphCache* cache)
    : config_(config), ctx_(ctx), plan_only_(plan_only) {
  TS_CHECK(ctx || plan_only, "a pipeline that runs needs its ranks' communicators");
  set_stage_mesh(mesh, rank);
  check_zero(config.zero);

  const int m = static_cast<int>(config.microbatches);
  const int chunks = static_cast<int>(config.chunks);
  schedule_ = make_schedule(config.schedule, pipe_size_, m, chunks);
  check_schedule(schedule_);  // deadlock freedom and matching transfers, before compiling
  eval_schedule_ = forward_only_schedule(pipe_size_, chunks);
  const int stage_count = pipe_size_ * chunks;

  std::shared_ptr<PipelineGraphs> owned;  // set when built here, not shared
  const std::shared_ptr<const PipelineGraphs> graphs =
      pipeline_graphs(config, stage_count, schedule_.split_backward, cache, owned);
  // Against the whole model: a middle stage lacks the vocab dim a layout may shard.
  stage_layout_.drop_absent_defaults(graphs->forward);
  stage_layout_.validate(graphs->forward, stage_mesh_);
  partition_ = graphs->partition;
  flops_per_step_ = graphs->flops_per_step;
  stage_parameters_ = graphs->stage_parameters;
  collect_params(*graphs);
  assign_zero_state();
  for (int c = 0; c < chunks; ++c) compile_chunk(c, stage_count, *graphs, owned.get(), cache);
}

void PipelineModel::set_stage_mesh(const Mesh& mesh, int rank) {
  mesh_ = mesh;
  const std::vector<int> coords = mesh.coords(rank);
  if (const int a = mesh.axis_index(kPipeAxis); a >= 0) pipe_axis_ = a;
  std::vector<MeshAxis> stage_axes;
  std::vector<int> stage_coords;
  for (int a = 0; a < static_cast<int>(mesh.axes().size()); ++a) {
    if (a == pipe_axis_) continue;
    stage_axes.push_back(mesh.axis(a));
    stage_coords.push_back(coords[a]);
  }
  if (pipe_axis_) {
    pipe_size_ = mesh.axis(*pipe_axis_).size;
    pipe_rank_ = coords[*pipe_axis_];
  }
  stage_mesh_ = Mesh(stage_axes);
  stage_rank_ = stage_mesh_.rank_of(stage_coords);
  stage_layout_ = layout_for(config_, stage_mesh_);
  if (int a = stage_layout_.axis_of(kBatchDim); a >= 0) data_axis_ = stage_mesh_.axis(a).name;
}

void PipelineModel::collect_params(const PipelineGraphs& graphs) {
  const Graph& forward = graphs.forward;
  for (ValueId id : forward.params()) {
    const Node& n = forward.node(id);
    PipelineParam p{n.name, n.shape, n.init, {}, {}, std::nullopt, false};
    for (const StageGraph& g : graphs.train)
      if (g.graph.find(n.name) >= 0) {
        int r = schedule_.rank_of_stage(g.stage);
        if (std::find(p.pipe_ranks.begin(), p.pipe_ranks.end(), r) == p.pipe_ranks.end())
          p.pipe_ranks.push_back(r);
      }
    std::sort(p.pipe_ranks.begin(), p.pipe_ranks.end());
    p.held = std::find(p.pipe_ranks.begin(), p.pipe_ranks.end(), pipe_rank_) != p.pipe_ranks.end();
    p.sharding = on_full_mesh(stage_layout_.target(n.shape, n.name, stage_mesh_));
    params_.push_back(p);
  }
}

void PipelineModel::compile_chunk(int c, int stage_count, const PipelineGraphs& graphs,
                                  PipelineGraphs* owned, PipelineGraphCache* cache) {
  const int k = schedule_.stage_of(pipe_rank_, c);
  LocalStage st;
  std::string eval_key;  // set where the cache may hold the evaluation arena
  size_t* cached_eval = nullptr;
  if (cache && plan_only_) {
    eval_key = eval_arena_key(config_, k, stage_count, stage_mesh_, stage_rank_, partition_);
    auto it = cache->eval_arena_bytes.find(eval_key);
    if (it != cache->eval_arena_bytes.end()) cached_eval = &it->second;
  }
  if (owned) {
    st.graph = std::move(owned->train[k]);
    st.eval_graph = std::move(owned->eval[k]);
  } else {
    st.graph = graphs.train[k];
    if (!cached_eval) st.eval_graph = graphs.eval[k];
  }
  lower_stage(st, /*with_eval=*/!cached_eval, stage_layout_, stage_mesh_, stage_rank_);
  st.instances = instances_needed(schedule_, pipe_rank_, c);
  stages_.push_back(std::move(st));
  train_stages_.push_back(compile(stages_.back(), c, false));
  stages_.back().arena_bytes = train_stages_.back().instances[0]->arena_bytes();
  stages_.back().phase_local_bytes = train_stages_.back().instances[0]->phase_local_bytes();
  stages_.back().offload_bytes = train_stages_.back().instances[0]->offload_bytes();
  if (cached_eval) {
    PipelineStage none;
    none.stage = k;
    none.chunk = c;
    eval_stages_.push_back(std::move(none));
    stages_.back().eval_arena_bytes = *cached_eval;
  } else {
    eval_stages_.push_back(compile(stages_.back(), c, true));
    stages_.back().eval_arena_bytes = eval_stages_.back().instances[0]->arena_bytes();
    if (!eval_key.empty()) cache->eval_arena_bytes[eval_key] = stages_.back().eval_arena_bytes;
  }
}

void PipelineModel::check_zero(int zero) const {
  if (zero == 3)
    TS_THROW(
        "config: 'zero' 3 (parameters gathered on use) with pipelines or micro-batches is "
        "not supported yet; stages 1 and 2 are");
  if (zero > 0 && data_axis_.empty())
    TS_THROW("config: 'zero' ", zero,
             " shards over the data-parallel axis, but the layout maps 'batch' to no mesh axis");
}

void PipelineModel::assign_zero_state() {
  // ZeRO 1 and 2 shard alike: every parameter's local block, flat, over data.
  const int data = data_axis_.empty() ? -1 : mesh_.axis_index(data_axis_);
  for (PipelineParam& p : params_)
    p.zero = config_.zero == 0 ? std::nullopt
                               : flat_shard(p.sharding.local_numel(p.shape, mesh_), mesh_, data);
}

void PipelineModel::set_zero(int zero) {
  TS_CHECK(plan_only_, "set_zero: only a plan-only pipeline changes its ZeRO stage");
  check_zero(zero);
  config_.zero = zero;
  assign_zero_state();
}

PipelineStage PipelineModel::compile(const LocalStage& st, int chunk, bool eval) {
  const StageGraph& sg = eval ? st.eval_graph : st.graph;
  const LocalGraph& local = eval ? st.eval_local : st.local;
  auto to_local = [&](const std::vector<ValueId>& ids) {
    std::vector<ValueId> out;
    for (ValueId v : ids) out.push_back(local.local_of[v]);
    return out;
  };
  PipelineStage ps;
  ps.stage = sg.stage;
  ps.chunk = chunk;
  ps.activations_in = to_local(sg.activations_in);
  ps.activations_out = to_local(sg.activations_out);
  ps.gradients_in = to_local(sg.gradients_in);
  ps.gradients_out = to_local(sg.gradients_out);
  ps.param_grads = to_local(sg.param_grads);
  if (sg.loss) ps.loss = local.local_of[*sg.loss];
  if (sg.logits) ps.logits = local.local_of[*sg.logits];
  std::vector<ValueId> outputs = ps.activations_out;
  outputs.insert(outputs.end(), ps.gradients_out.begin(), ps.gradients_out.end());
  outputs.insert(outputs.end(), ps.param_grads.begin(), ps.param_grads.end());
  if (ps.loss) outputs.push_back(*ps.loss);
  if (ps.logits) outputs.push_back(*ps.logits);
  CompileOptions options = precision_compile_options(config_);
  options.comms = ctx_ ? &ctx_->groups() : nullptr;
  options.bucket_bytes = static_cast<size_t>(config_.bucket_mib * 1048576.0);
  options.plan_only = plan_only_;
  if (!eval)
    options.phase_starts = {local.first_local_at(sg.backward_input_begin),
                            local.first_local_at(sg.backward_weight_begin)};
  if (!eval && offloads(config_, "activations")) options.offload_from = options.phase_starts[0];
  // Instances never run at once: they share one region for the buffers that
  // live within a phase and keep only what crosses phases (the stash).
  options.separate_phase_local = !eval;
  // Parameter gradients go into the stage's accumulators as they are
  // computed: a micro-batch in flight holds none.
  if (!eval) options.accumulated_outputs = ps.param_grads;
  // The activation sent after the forward holds its bytes until the send
  // completed, the gradient received before the backward from then on: the
  // two (and the gradient sent) share bytes of the stash.
  if (!eval) options.sent_outputs = ps.activations_out, options.late_inputs = ps.gradients_in;
  // A synchronous step runs every micro-batch on the same weights: one bf16
  // copy of each, made once a step (the executor calls weights_changed()).
  options.share_weight_copies = !eval && !schedule_.asynchronous;
  // A plan needs one instance: the others are the same program (st.instances counts them).
  const int copies = eval || plan_only_ ? 1 : st.instances;
  for (int i = 0; i < copies; ++i) {
    ps.instances.push_back(std::make_unique<Program>(local.graph, outputs, options));
    options.shared_region = ps.instances.front()->shared_region();
  }
  return ps;
}

void PipelineModel::bind(const Lookup& param, const Lookup& grad, Lookup staging,
                         PipelineExecutor::OnStep on_step) {
  TS_CHECK(!plan_only_, "a pipeline compiled for a dry run cannot run");
  staging_ = std::move(staging);
  for (size_t k = 0; k < stages_.size(); ++k) {
    for (PipelineStage* ps : {&train_stages_[k], &eval_stages_[k]})
      for (auto& program : ps->instances)
        for (ValueId id : program->graph().params())
          program->bind_param(program->graph().node(id).name,
                              param(program->graph().node(id).name));
    train_stages_[k].accumulators.clear();
    const StageGraph& sg = stages_[k].graph;
    for (size_t i = 0; i < sg.param_grads.size(); ++i)
      train_stages_[k].accumulators.push_back(grad(sg.graph.node(sg.graph.params()[i]).name));
    PipelineStage& train = train_stages_[k];
    for (auto& program : train.instances)
      for (size_t i = 0; i < train.param_grads.size(); ++i)
        program->bind_accumulator(train.param_grads[i], train.accumulators[i]);
  }
  // Transfers run on the host communicator; staged, through pinned mirrors
  // (the evaluation's forward sends fit the training's).
  Communicator* pipe = pipe_axis_ ? &ctx_->host_groups().axis(kPipeAxis) : nullptr;
  if (pipe && ctx_->staged())
    transfer_staging_ = std::make_unique<TransferStaging>(
        train_stages_.front().instances.front()->backend(), train_stages_);
  auto feeder = [this](bool eval) {
    return [this, eval](int stage, int microbatch, Program& program) {
      for (const LocalStage& st : stages_)
        if (st.graph.stage == stage) feed(st, eval, eval ? eval_microbatch_ : microbatch, program);
    };
  };
  executor_ = std::make_unique<PipelineExecutor>(schedule_, pipe_rank_, std::move(train_stages_),
                                                 pipe, feeder(false), std::move(on_step),
                                                 transfer_staging_.get());
  eval_executor_ = std::make_unique<PipelineExecutor>(
      eval_schedule_, pipe_rank_, std::move(eval_stages_), pipe, feeder(true), [](int) {},
      transfer_staging_.get());
}

void PipelineModel::feed(const LocalStage& st, bool eval, int microbatch, Program& program) {
  const Graph& g = eval ? st.eval_graph.graph : st.graph.graph;
  const LocalGraph& local = eval ? st.eval_local : st.local;
  for (ValueId id : g.inputs()) {
    const Node& n = g.node(id);
    if (is_pipe_value(n.name)) continue;
    TS_CHECK(n.shape.rank() >= 1 && n.shape[0].name == kBatchDim, "pipeline: input '", n.name,
             "' must lead with the batch dim to be cut into micro-batches");
    const float* full = staging_(n.name);
    // Micro-batches are consecutive row blocks of the batch (token ids travel as raw words).
    const float* rows = full + microbatch * n.shape.numel();
    feed_block_.resize(program.value_bytes(program.input_id(n.name)) / sizeof(float));
    ctx_->slice_local(n.shape, on_full_mesh(local.sharding_of[id]), rows, feed_block_.data());
    program.write_input(n.name, feed_block_.data(), feed_block_.size() * sizeof(float));
  }
}

// Only the last stage's ranks summed losses; the others hold 0.
double PipelineModel::share_loss(double local_sum) {
  float total = static_cast<float>(local_sum);
  if (pipe_axis_)
    ctx_->host_groups().axis(kPipeAxis).all_reduce(&total, 1, ReduceKind::kSum, "loss");
  return total;
}

double PipelineModel::run_step() {
  last_outcome_ = executor_->run();
  return share_loss(last_outcome_.loss_sum) / schedule_.microbatches;
}

double PipelineModel::evaluate(int microbatch) {
  TS_CHECK(microbatch >= 0 && microbatch < eval_microbatches(), "evaluation micro-batch ",
           microbatch, " of ", eval_microbatches());
  eval_microbatch_ = microbatch;
  PipelineExecutor::StepOutcome o = eval_executor_->run();
  return share_loss(o.loss_sum);
}

bool PipelineModel::eval_logits(Shape* shape, Sharding* sharding, std::vector<float>* local) {
  for (size_t k = 0; k < stages_.size(); ++k) {
    const StageGraph& g = stages_[k].eval_graph;
    if (!g.logits) continue;
    *shape = g.graph.node(*g.logits).shape;
    *sharding = on_full_mesh(stages_[k].eval_local.sharding_of[*g.logits]);
    PipelineStage& ps = eval_executor_->stages()[k];
    *local = ps.instances[0]->read_f32(ps.logits.value());
    return true;
  }
  return false;
}

const PipelineParam* PipelineModel::param(const std::string& name) const {
  for (const PipelineParam& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

size_t PipelineModel::arena_bytes() const {
  size_t total = 0;
  for (const LocalStage& st : stages_)
    total += st.instances * st.arena_bytes + st.phase_local_bytes;
  return total;
}

size_t PipelineModel::eval_arena_bytes() const {
  size_t total = 0;
  for (const LocalStage& st : stages_) total += st.eval_arena_bytes;
  return total;
}

}  // namespace tessel
