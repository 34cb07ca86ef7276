// The trainer's pipeline path: a `pipe` mesh axis, several micro-batches, or
// both (train/pipeline_model.h). Each rank holds the parameters its stages
// read; a step zeroes the gradient accumulators, runs the schedule (the
// stages add every micro-batch's gradients), and at the schedule's optimizer
// step sums the accumulators over the data axis in one all-reduce and over
// the pipeline ranks sharing a tied parameter, then updates what it holds.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include "tessel/base/error.h"
#include "tessel/compile/memory_report.h"
#include "tessel/runtime/chrome_trace.h"
#include "tessel/schedule/schedule_check.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/fault_inject.h"
#include "tessel/train/trainer.h"

namespace tessel {

namespace {

std::string tied_copy_name(const std::string& param, int pipe_coord) {
  return param + "@pipe" + std::to_string(pipe_coord);
}

}  // namespace

void Trainer::init_pipeline() {
  pipe_ = std::move(compiled_.pipeline);

  // Parameters this rank holds, at their local shapes, from the full initial values.
  Graph held;
  for (const PipelineParam& p : pipe_->params())
    if (p.held) held.add_param(p.name, p.sharding.local_shape(p.shape, ctx_->mesh()), p.init);
  params_ = std::make_unique<ParamStore>(held);
  size_t total = 0;
  for (const ParamEntry& e : params_->entries()) total += e.value.nbytes();
  grad_accumulators_ = AlignedBuffer(std::max<size_t>(total, sizeof(float)));
  size_t offset = 0, largest_tie = 0;
  for (const PipelineParam& p : pipe_->params()) {
    if (p.pipe_ranks.size() > 1)
      largest_tie =
          std::max<size_t>(largest_tie, p.sharding.local_shape(p.shape, ctx_->mesh()).numel());
    if (!p.held) continue;
    ParamEntry& e = params_->at(p.name);
    std::vector<float> full(p.shape.numel());
    init_param(p.name, p.init, config_.seed, p.shape.numel(), full.data());
    ctx_->slice_local(p.shape, p.sharding, full.data(), e.value.f32());
    float* acc = reinterpret_cast<float*>(grad_accumulators_.data() + offset);
    accumulator_of_[p.name] = acc;
    offset += e.value.nbytes();
    // Copies of this gradient (or gradient slice): replicas on the stage
    // mesh, times the pipeline ranks sharing a tied parameter.
    const Sharding& state = p.state_sharding();
    double copies = 1;
    for (int a = 0; a < state.axis_count(); ++a)
      if (a != pipe_->pipe_axis() && !state[a].is_split()) copies *= ctx_->mesh().axis(a).size;
    stage_replicas_.push_back(copies);
    replicas_.push_back(copies * static_cast<double>(p.pipe_ranks.size()));
    slots_.push_back({e.value.f32(), acc, e.value.numel(), &e});
  }
  init_pipeline_zero();
  tie_scratch_ = AlignedBuffer(std::max<size_t>(largest_tie, 1) * sizeof(float));
  {
    Graph g;
    GraphBuilder b(g);
    build_model(config_, b, config_.batch, /*training=*/true);
    for (ValueId id : g.inputs())
      staging_.emplace(g.node(id).name, Tensor(g.node(id).shape, g.node(id).dtype));
  }
  pipe_->bind(
      [this](const std::string& name) { return params_->at(name).value.f32(); },
      [this](const std::string& name) { return accumulator_of_.at(name); },
      [this](const std::string& name) { return static_cast<float*>(staging_.at(name).raw()); },
      [this](int microbatch) { pipeline_update(microbatch); });
  if (pipe_->schedule().asynchronous) {
    init_asynchronous();
  } else if (fault_armed(FaultPoint::kForward) || fault_armed(FaultPoint::kBackward)) {
    PipelineExecutor::WeightHooks hooks;  // synchronous schedules have none otherwise
    hooks.before_forward = [this](size_t, int, Program&) {
      fault_point(FaultPoint::kForward, step_);
    };
    hooks.before_backward = [this](size_t, int, Program&) {
      fault_point(FaultPoint::kBackward, step_);
    };
    pipe_->executor().set_weight_hooks(std::move(hooks));
  }
  pipe_->executor().tracing = !config_.trace.empty();
  // A common time origin for every rank's trace: right after a collective.
  float sync = 0;
  ctx_->world().all_reduce(&sync, 1, ReduceKind::kSum, "trace clock");
  pipe_->executor().set_epoch(steady_seconds());
}

// Asynchronous schedules: micro-batches run on stashed or predicted weights
// (weight_versions.h), and each rank updates its stages' weights at the
// schedule's steps without waiting for the others.
void Trainer::init_asynchronous() {
  const Schedule& s = pipe_->schedule();
  const int r = pipe_->pipe_rank();
  // Updates between each micro-batch's forward and backward on this rank.
  std::vector<int> staleness(s.microbatches, 0);
  std::vector<int> started(s.microbatches, -1);
  int steps = 0;
  for (const Action& a : s.actions[r]) {
    if (a.kind == ActionKind::kOptimizerStep) ++steps;
    if (a.kind == ActionKind::kForward) started[a.microbatch] = steps;
    if (a.kind == ActionKind::kBackward) staleness[a.microbatch] = steps - started[a.microbatch];
  }
  updates_per_step_ = steps;
  const ScheduleReport report = check_schedule(s);
  int in_flight = 0;
  for (const PipelineModel::LocalStage& st : pipe_->stages()) in_flight += st.instances;
  const bool predict = s.name == "xpipe";
  versions_ = std::make_unique<WeightVersions>(
      predict ? WeightVersions::Mode::kPredict : WeightVersions::Mode::kStash, *params_,
      std::min(in_flight, report.weight_versions[r]), config_, staleness);
  PipelineExecutor::WeightHooks hooks;
  hooks.before_forward = [this](size_t, int mb, Program& p) {
    fault_point(FaultPoint::kForward, step_);
    versions_->before_forward(mb, p);
  };
  hooks.before_backward = [this](size_t, int mb, Program& p) {
    fault_point(FaultPoint::kBackward, step_);
    versions_->before_backward(mb, p);
  };
  hooks.released = [this](size_t, int mb, Program&) { versions_->released(mb); };
  pipe_->executor().set_weight_hooks(std::move(hooks));
}

// One asynchronous update of this rank's weights from the micro-batches
// accumulated since the last: their mean gradient, summed over data ranks
// (and over the pipeline ranks sharing a tied parameter), clipped by the
// norm over this stage's ranks only (a world-wide norm would make every
// stage wait for every other).
void Trainer::asynchronous_update(int microbatch) {
  // The step after micro-batch i applies the gradients of those since the last step.
  const int covered = microbatch - last_stepped_microbatch_;
  last_stepped_microbatch_ = microbatch;
  // Each micro-batch's gradient was scaled by 1/m for a synchronous step.
  reduce_accumulated_gradients(static_cast<float>(pipe_->schedule().microbatches) / covered);
  auto stage_sum = [this](const std::vector<double>& local_sq) {
    float total_sq = 0;
    for (size_t i = 0; i < local_sq.size(); ++i)
      total_sq += static_cast<float>(local_sq[i] / stage_replicas_[i]);
    fault_point(FaultPoint::kCollective, step_);
    for (const MeshAxis& axis : pipe_->stage_mesh().axes())
      ctx_->groups().axis(axis.name).all_reduce(&total_sq, 1, ReduceKind::kSum, "grad_norm");
    return static_cast<double>(total_sq);
  };
  ++updates_;
  last_update_ = apply_update(config_, slots_, step_, stage_sum, updates_);
  fault_point(FaultPoint::kOptimizer, step_);
  gather_pipeline_slices();
  std::memset(grad_accumulators_.data(), 0, grad_accumulators_.size());
  versions_->on_update(updates_, last_update_.lr);
}

// The accumulators (times `scale`) summed over the data axis in one call,
// and over the pipeline ranks sharing a tied parameter (the embedding read
// by the first and the last stage): every pipeline rank joins one sum per
// tie, in model order, so the holders end with bitwise-equal gradients.
void Trainer::reduce_accumulated_gradients(float scale) {
  float* acc = reinterpret_cast<float*>(grad_accumulators_.data());
  int64_t total = 0;
  for (const ParamEntry& e : params_->entries()) total += e.value.numel();
  if (scale != 1.0f)
    for (int64_t i = 0; i < total; ++i) acc[i] *= scale;
  const bool zero = config_.zero > 0;
  if (!zero && !pipe_->data_axis().empty() && total > 0)
    ctx_->groups().axis(pipe_->data_axis()).all_reduce(acc, total, ReduceKind::kSum, "gradients");
  for (const PipelineParam& p : pipe_->params()) {
    if (p.pipe_ranks.size() < 2) continue;
    const int64_t n = p.sharding.local_shape(p.shape, ctx_->mesh()).numel();
    float* buffer = reinterpret_cast<float*>(tie_scratch_.data());
    if (p.held)
      buffer = accumulator_of_.at(p.name);
    else
      std::memset(buffer, 0, n * sizeof(float));
    ctx_->groups().axis("pipe").all_reduce(buffer, n, ReduceKind::kSum, "tied " + p.name);
  }
  if (zero) reduce_scatter_accumulated_gradients();
}

// ZeRO 1 and 2 on a pipeline: a parameter ZeRO shards (train/zero.h) is
// updated as this rank's slice of its leading dim: its accumulated gradient
// is reduce-scattered over data into a slice buffer, AdamW keeps moments of
// the slice only, and the updated slices are all-gathered. (Accumulators
// stay whole: micro-batches add into them before the reduction.)
void Trainer::init_pipeline_zero() {
  if (config_.zero == 0) return;
  const int data = ctx_->mesh().axis_index(pipe_->data_axis());
  const int n = ctx_->mesh().axis(data).size;
  int64_t slices = 0, largest = 1;
  std::vector<size_t> sliced;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const PipelineParam& p = *pipe_->param(slots_[i].state->name);
    if (!p.zero_state) continue;
    slots_[i].n /= n;
    slices += slots_[i].n;
    largest = std::max(largest, slots_[i].n);
    sliced.push_back(i);
  }
  zero_grads_ = AlignedBuffer(std::max<int64_t>(slices, 1) * sizeof(float));
  slice_buffer_ = AlignedBuffer(largest * sizeof(float));
  float* g = zero_grads_.as<float>();
  for (size_t i : sliced) {
    slots_[i].param += ctx_->coords()[data] * slots_[i].n;
    slots_[i].grad = g;
    g += slots_[i].n;
  }
}

// ZeRO on a pipeline, after the tied sums: reduce-scatter each sliced
// gradient over data into its slot, all-reduce the others.
void Trainer::reduce_scatter_accumulated_gradients() {
  Communicator& data = ctx_->groups().axis(pipe_->data_axis());
  for (UpdateSlot& slot : slots_) {
    float* acc = accumulator_of_.at(slot.state->name);
    const int64_t whole = slot.state->value.numel();
    if (slot.n == whole)
      data.all_reduce(acc, whole, ReduceKind::kSum, "gradients");
    else
      data.reduce_scatter(acc, const_cast<float*>(slot.grad), slot.n, "zero gradients");
  }
}

// After a ZeRO update each data rank holds one updated slice; gather them.
void Trainer::gather_pipeline_slices() {
  if (config_.zero == 0) return;
  Communicator& data = ctx_->groups().axis(pipe_->data_axis());
  for (UpdateSlot& slot : slots_) {
    ParamEntry& e = *slot.state;
    if (slot.n == e.value.numel()) continue;
    std::memcpy(slice_buffer_.data(), slot.param, slot.n * sizeof(float));
    data.all_gather(slice_buffer_.as<float>(), e.value.f32(), slot.n, "zero parameter gather");
  }
}

// Gradients of the whole batch from the accumulated micro-batch partials,
// then one optimizer update of the parameters this rank holds.
void Trainer::pipeline_update(int microbatch) {
  if (versions_) return asynchronous_update(microbatch);
  reduce_accumulated_gradients(1.0f);
  auto global_sum = [this](const std::vector<double>& local_sq) {
    float total_sq = 0;
    for (size_t i = 0; i < local_sq.size(); ++i)
      total_sq += static_cast<float>(local_sq[i] / replicas_[i]);
    fault_point(FaultPoint::kCollective, step_);
    ctx_->world().all_reduce(&total_sq, 1, ReduceKind::kSum, "grad_norm");
    return static_cast<double>(total_sq);
  };
  last_update_ = apply_update(config_, slots_, step_, global_sum);
  fault_point(FaultPoint::kOptimizer, step_);
  gather_pipeline_slices();
}

StepResult Trainer::pipeline_step() {
  auto input = [this](const std::string& name) -> void* {
    auto it = staging_.find(name);
    if (it == staging_.end()) TS_THROW("the task wrote input '", name, "', which the model lacks");
    return it->second.raw();
  };
  task_->fill_batch(input, Split::kTrain, step_, config_.batch);
  std::memset(grad_accumulators_.data(), 0, grad_accumulators_.size());
  last_stepped_microbatch_ = -1;
  StepResult r;
  r.step = step_;
  r.loss = pipe_->run_step();
  if (step_ > 0) {  // the first step pays one-time costs (page faults, thread start)
    busy_seconds_ += pipe_->last_outcome().busy_seconds;
    makespan_seconds_ += pipe_->last_outcome().compute_end;
    ++timed_steps_;
  }
  r.grad_norm = last_update_.grad_norm;
  r.lr = last_update_.lr;
  ++step_;
  return r;
}

EvalResult Trainer::pipeline_evaluate() {
  auto input = [this](const std::string& name) -> void* { return staging_.at(name).raw(); };
  double loss = 0, accuracy = 0;
  std::vector<float> full_logits;
  for (int64_t i = 0; i < config_.eval_batches; ++i) {
    task_->fill_batch(input, Split::kVal, i, config_.batch);
    loss += pipe_->evaluate();
    if (!task_->has_accuracy()) continue;
    // The last stage's ranks hold the logits; every rank gets them whole.
    Shape shape;
    Sharding sharding;
    const float* local = pipe_->eval_logits(&shape, &sharding);
    float numel = local ? static_cast<float>(shape.numel()) : 0.0f;
    ctx_->world().all_reduce(&numel, 1, ReduceKind::kMax, "logits size");
    full_logits.resize(static_cast<size_t>(numel));
    if (!local) {  // any shape of that size; only the holders write
      shape = Shape{{"n", static_cast<int64_t>(numel)}};
      sharding = Sharding::replicated(ctx_->mesh().axes().size());
    }
    const int last = pipe_->schedule().rank_of_stage(pipe_->schedule().stages() - 1);
    ctx_->gather_full(shape, sharding, local, full_logits.data(), pipe_->pipe_axis(), last);
    accuracy += task_->accuracy(full_logits.data(), input, config_.batch);
  }
  EvalResult r;
  r.loss = loss / config_.eval_batches;
  r.accuracy = task_->has_accuracy() ? accuracy / config_.eval_batches : -1;
  return r;
}

int64_t Trainer::pipeline_parameter_count() const {
  int64_t n = 0;
  for (const PipelineParam& p : pipe_->params()) n += p.shape.numel();
  return n;
}

// Every rank drives every gather (world collectives) in the writer's order;
// the first pipeline rank holding a parameter contributes it.
CheckpointSource Trainer::pipeline_checkpoint_source() {
  using Part = CheckpointSource::Part;
  CheckpointSource source;
  const bool moments = step_ > 0 && config_.optimizer == "adamw";
  // (parameter, pipeline rank whose copy) of each tensor written.
  std::vector<std::pair<size_t, int>> holder;
  int64_t largest = 1;
  const std::vector<PipelineParam>& params = pipe_->params();
  for (size_t i = 0; i < params.size(); ++i) {
    source.params.push_back({params[i].name, params[i].shape, moments});
    holder.emplace_back(i, params[i].pipe_ranks.front());
    largest = std::max(largest, params[i].shape.numel());
  }
  // Asynchronous schedules clip each stage's gradient by its own norm, so
  // the later stages' copies of a tied parameter drift from the first's:
  // they are saved too, for an exact resume on the same pipeline.
  if (versions_)
    for (size_t i = 0; i < params.size(); ++i)
      for (size_t k = 1; k < params[i].pipe_ranks.size(); ++k) {
        const int coord = params[i].pipe_ranks[k];
        source.params.push_back(
            {tied_copy_name(params[i].name, coord), params[i].shape, moments, true});
        holder.emplace_back(i, coord);
      }
  auto full = std::make_shared<AlignedBuffer>(largest * sizeof(float));
  source.full = [this, full, holder](size_t t, Part part) -> const float* {
    const auto [i, coord] = holder[t];
    const PipelineParam& p = pipe_->params()[i];
    const float* local = nullptr;
    if (p.held) {
      const ParamEntry& e = params_->at(p.name);
      local = part == Part::kValue ? e.value.f32() : part == Part::kM ? e.m.f32() : e.v.f32();
    }
    ctx_->gather_full(p.shape, part == Part::kValue ? p.sharding : p.state_sharding(), local,
                      full->as<float>(), pipe_->pipe_axis(), coord);
    return full->as<float>();
  };
  source.state = run_state();
  return source;
}

void Trainer::pipeline_load(const std::string& dir) {
  // Each rank reads only the blocks of the parameters it holds (checkpoint/shard_load.h).
  std::vector<ShardRequest> requests;
  for (const PipelineParam& p : pipe_->params())
    requests.push_back({p.name, p.shape, p.held, block_of(p.shape, p.sharding),
                        block_of(p.shape, p.state_sharding())});
  ShardedCheckpoint loaded = load_checkpoint_shards(dir, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const PipelineParam& p = pipe_->params()[i];
    if (!p.held) continue;
    ParamEntry& dst = params_->at(p.name);
    std::memcpy(dst.value.raw(), loaded.value[i].data(), dst.value.nbytes());
    if (loaded.m[i].empty()) continue;
    const Shape state = p.state_sharding().local_shape(p.shape, ctx_->mesh());
    dst.m = Tensor(state, DType::kF32);
    dst.v = Tensor(state, DType::kF32);
    std::memcpy(dst.m.raw(), loaded.m[i].data(), dst.m.nbytes());
    std::memcpy(dst.v.raw(), loaded.v[i].data(), dst.v.nbytes());
  }
  step_ = read_checkpoint_info(dir).step;
  const std::string tied_path = (std::filesystem::path(dir) / "tied_copies.safetensors").string();
  if (versions_ && std::filesystem::exists(tied_path)) {  // this stage's own copy of a tie
    SafetensorsReader tied(tied_path);  // this rank's blocks only, like the model files
    for (const PipelineParam& p : pipe_->params()) {
      if (!p.held || p.pipe_ranks.front() == pipe_->pipe_rank()) continue;
      const std::string name = tied_copy_name(p.name, pipe_->pipe_rank());
      ParamEntry& dst = params_->at(p.name);
      auto load = [&](const std::string& tensor, const Sharding& s, float* into) {
        std::vector<float> block;
        if (!read_tensor_block(tied, tensor, p.shape, block_of(p.shape, s), block)) return false;
        std::copy(block.begin(), block.end(), into);
        return true;
      };
      if (!load(name, p.sharding, dst.value.f32())) continue;  // saved on another pipeline
      if (dst.m.nbytes() > 0) {
        load(name + ".m", p.state_sharding(), dst.m.f32());
        load(name + ".v", p.state_sharding(), dst.v.f32());
      }
    }
  }
  if (versions_) {  // drained at the step boundary: only the update count and last lr carry over
    updates_ = step_ * updates_per_step_;
    if (step_ > 0) versions_->on_update(updates_, learning_rate(config_, step_ - 1));
  }
}

Trainer::PipelineStats Trainer::pipeline_stats() {
  PipelineStats stats;
  if (!pipe_) return stats;
  const int world = ctx_->mesh().rank_count();
  // Each rank's compute time and the end of its last compute, summed over steps.
  float mine[2] = {static_cast<float>(busy_seconds_), static_cast<float>(makespan_seconds_)};
  std::vector<float> all(2 * world);
  ctx_->world().all_gather(mine, all.data(), 2, "pipeline timing");
  double makespan = 0;
  for (int r = 0; r < world; ++r) makespan = std::max<double>(makespan, all[2 * r + 1]);
  const SimulatedTimeline theory = simulate_schedule(pipe_->schedule());
  for (int r = 0; r < world; ++r) {
    const int p = pipe_->pipe_axis() >= 0 ? ctx_->mesh().coords(r)[pipe_->pipe_axis()] : 0;
    stats.pipe_rank.push_back(p);
    stats.measured_bubble.push_back(makespan > 0 ? 1.0 - all[2 * r] / makespan : 0.0);
    stats.theoretical_bubble.push_back(theory.bubble_fraction.at(p));
  }
  stats.steps = timed_steps_;
  float versions = versions_ ? static_cast<float>(versions_->peak_versions()) : 1.0f;
  std::vector<float> all_versions(world);
  ctx_->world().all_gather(&versions, all_versions.data(), 1, "weight versions");
  for (float v : all_versions) stats.weight_versions.push_back(static_cast<int>(v));
  return stats;
}

void Trainer::write_trace(const std::string& path) {
  if (!pipe_)
    TS_THROW("--trace records pipeline actions; this run has no pipeline or micro-batches");
  // Every rank's events, padded to the longest, gathered as 7 floats each
  // (times as a float and its remainder, so microseconds survive long runs).
  constexpr int kFields = 7;
  const std::vector<TraceEvent>& mine = pipe_->executor().trace();
  float count = static_cast<float>(mine.size());
  ctx_->world().all_reduce(&count, 1, ReduceKind::kMax, "trace length");
  const int64_t n = static_cast<int64_t>(count) * kFields;
  std::vector<float> packed(n, -1.0f);
  for (size_t i = 0; i < mine.size(); ++i) {
    const TraceEvent& e = mine[i];
    float* f = &packed[i * kFields];
    f[0] = static_cast<float>(e.kind);
    f[1] = static_cast<float>(e.microbatch);
    f[2] = static_cast<float>(e.stage);
    f[3] = static_cast<float>(e.start);
    f[4] = static_cast<float>(e.start - f[3]);
    f[5] = static_cast<float>(e.end);
    f[6] = static_cast<float>(e.end - f[5]);
  }
  const int world = ctx_->mesh().rank_count();
  std::vector<float> all(n * world);
  ctx_->world().all_gather(packed.data(), all.data(), n, "trace");
  if (!ctx_->is_root()) return;
  std::vector<std::vector<TraceEvent>> per_rank(world);
  std::vector<std::string> names;
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; i += kFields) {
      const float* f = &all[r * n + i];
      if (f[0] < 0) break;
      per_rank[r].push_back({static_cast<int>(f[0]), static_cast<int>(f[1]), static_cast<int>(f[2]),
                             double(f[3]) + f[4], double(f[5]) + f[6]});
    }
    std::string name = "rank " + std::to_string(r);
    if (pipe_->pipe_axis() >= 0)
      name += " (pipe " + std::to_string(ctx_->mesh().coords(r)[pipe_->pipe_axis()]) + ")";
    names.push_back(name);
  }
  write_file_atomically(path, chrome_trace_json(per_rank, names));
}

}  // namespace tessel
