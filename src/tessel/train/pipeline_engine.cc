#include "tessel/train/pipeline_engine.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/ir/model_contract.h"
#include "tessel/schedule/action.h"
#include "tessel/schedule/schedule_check.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/fault_inject.h"

namespace tessel {

namespace {

std::string tied_copy_name(const std::string& param, int pipe_coord) {
  return param + "@pipe" + std::to_string(pipe_coord);
}

// Every rank's events as a Chrome trace (the JSON "Trace Event Format" that
// Perfetto and chrome://tracing open): one track per rank (`per_rank[r]`,
// times in seconds from a shared origin; `track_names[r]`, its label), one
// complete ("X") event per pipeline action, named by kind, micro-batch and
// stage; its args hold the micro-batch and stage where the action has them
// (an optimizer step covering all micro-batches has neither).
std::string chrome_trace_json(const std::vector<std::vector<TraceEvent>>& per_rank,
                              const std::vector<std::string>& track_names) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t r = 0; r < per_rank.size(); ++r) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", track_names.at(r)}}}});
    for (const TraceEvent& e : per_rank[r]) {
      const ActionKind kind = static_cast<ActionKind>(e.kind);
      std::string name = action_name(kind);
      nlohmann::json args = nlohmann::json::object();
      if (e.microbatch) {
        name += " mb" + std::to_string(*e.microbatch);
        args["microbatch"] = *e.microbatch;
      }
      if (e.stage) {
        name += " s" + std::to_string(*e.stage);
        args["stage"] = *e.stage;
      }
      events.push_back({{"name", name},
                        {"cat", is_compute(kind)         ? "compute"
                                : is_communication(kind) ? "transfer"
                                                         : "optimizer"},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", r},
                        {"ts", e.start * 1e6},
                        {"dur", (e.end - e.start) * 1e6},
                        {"args", args}});
    }
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

}  // namespace

PipelineEngine::PipelineEngine(CompiledRank compiled, DistributedContext& ctx, Optimizer optimizer)
    : Engine(std::move(compiled), ctx, std::move(optimizer)) {
  init_params();
  accumulator_elements_ = std::max<int64_t>(storage_.accumulator_elements, 1);
  grad_accumulators_ =
      backend_.allocate(MemorySpace::kDevice, accumulator_elements_ * sizeof(float));
  float* acc = reinterpret_cast<float*>(grad_accumulators_.data());
  for (size_t i = 0; i < held_.size(); ++i) {
    ParamEntry& e = params_->entries()[i];
    accumulator_of_[e.name] = acc;
    held_index_[e.name] = i;
    slots_.push_back({e.value.device_f32(), acc, e.value.numel(), &e});
    acc += e.value.numel();
  }
  init_zero();
  tie_scratch_ =
      backend_.allocate(MemorySpace::kDevice, storage_.tie_scratch_elements * sizeof(float));
  model().bind([this](const std::string& name) { return params_->at(name).value.device_f32(); },
               [this](const std::string& name) { return accumulator_of_.at(name); },
               [this](const std::string& name) { return static_cast<float*>(input(name)); },
               [this](int microbatch) { update(microbatch); });
  if (model().schedule().asynchronous) init_asynchronous();
  // Synchronous schedules have weight hooks only where a fault is armed.
  if (versions_ || fault_armed(FaultPoint::kForward) || fault_armed(FaultPoint::kBackward)) {
    PipelineExecutor::WeightHooks hooks;
    hooks.before_forward = [this](size_t, int mb, Program& p) {
      fault_point(FaultPoint::kForward, step_);
      if (versions_) versions_->before_forward(mb, p);
    };
    hooks.before_backward = [this](size_t, int mb, Program& p) {
      fault_point(FaultPoint::kBackward, step_);
      if (versions_) versions_->before_backward(mb, p);
    };
    if (versions_) hooks.released = [this](size_t, int mb, Program&) { versions_->released(mb); };
    model().executor().set_weight_hooks(std::move(hooks));
  }
  model().executor().tracing = !compiled_.config.trace.empty();
  // A common time origin for every rank's trace: right after a collective.
  float sync = 0;
  ctx_.world().all_reduce(&sync, 1, ReduceKind::kSum, "trace clock");
  model().executor().set_epoch(steady_seconds());
}

// Asynchronous schedules: micro-batches run on stashed or predicted weights
// (weight_versions.h), and each rank updates its stages' weights at the
// schedule's steps without waiting for the others.
void PipelineEngine::init_asynchronous() {
  const Schedule& s = model().schedule();
  const int r = model().pipe_rank();
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
  for (const PipelineModel::LocalStage& st : model().stages()) in_flight += st.instances;
  const bool predict = s.name == "xpipe";
  versions_ = std::make_unique<WeightVersions>(
      predict ? WeightVersions::Mode::kPredict : WeightVersions::Mode::kStash, *params_,
      std::min(in_flight, report.weight_versions[r]), compiled_.config, staleness);
}

// One asynchronous update of this rank's weights from the micro-batches
// accumulated since the last: their mean gradient, summed over data ranks
// (and over the pipeline ranks sharing a tied parameter), clipped by the
// norm over this stage's ranks only (a world-wide norm would make every
// stage wait for every other).
void PipelineEngine::asynchronous_update(int microbatch) {
  // The step after micro-batch i applies the gradients of those since the last step.
  const int covered =
      last_stepped_microbatch_ ? microbatch - *last_stepped_microbatch_ : microbatch + 1;
  last_stepped_microbatch_ = microbatch;
  // Each micro-batch's gradient was scaled by 1/m for a synchronous step.
  reduce_accumulated_gradients(static_cast<float>(model().schedule().microbatches) / covered);
  ++updates_;
  update_slots(/*stage_only=*/true, updates_);
  zero_accumulators();
  versions_->on_update(updates_, last_update_.lr);
}

// The accumulators (times `scale`) summed over the data axis in one call,
// and over the pipeline ranks sharing a tied parameter (the embedding read
// by the first and the last stage): every pipeline rank joins one sum per
// tie, in model order, so the holders end with bitwise-equal gradients.
void PipelineEngine::reduce_accumulated_gradients(float scale) {
  float* acc = reinterpret_cast<float*>(grad_accumulators_.data());
  int64_t total = 0;
  for (const ParamEntry& e : params_->entries()) total += e.value.numel();
  if (scale != 1.0f) backend_.scale(acc, total, scale);
  const bool zero = compiled_.config.zero > 0;
  if (!zero && !model().data_axis().empty() && total > 0)
    ctx_.groups().axis(model().data_axis()).all_reduce(acc, total, ReduceKind::kSum, "gradients");
  for (const PipelineParam& p : model().params()) {
    if (p.pipe_ranks.size() < 2) continue;
    const int64_t n = p.sharding.local_shape(p.shape, ctx_.mesh()).numel();
    float* buffer = reinterpret_cast<float*>(tie_scratch_.data());
    if (p.held)
      buffer = accumulator_of_.at(p.name);
    else
      backend_.fill_zero(buffer, n);
    ctx_.groups().axis(kPipeAxis).all_reduce(buffer, n, ReduceKind::kSum, "tied " + p.name);
  }
  if (zero) reduce_scatter_accumulated_gradients();
}

// ZeRO 1 and 2 on a pipeline: every parameter is updated as this rank's
// flat chunk of its local block (compile/zero.h): its accumulated gradient
// is reduce-scattered over data into a chunk buffer, AdamW keeps moments of
// the chunk only, and the updated chunks are all-gathered. (Accumulators
// stay whole: micro-batches add into them before the reduction.)
void PipelineEngine::init_zero() {
  if (compiled_.config.zero == 0) return;
  zero_grads_ = backend_.allocate(
      MemorySpace::kDevice, std::max<int64_t>(storage_.zero_gradient_elements, 1) * sizeof(float));
  float* g = reinterpret_cast<float*>(zero_grads_.data());
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!held_[i]->zero) continue;
    slots_[i] = zero_slot(i, g, /*grad_is_chunk=*/true);
    g += held_[i]->zero->chunk();
  }
}

// ZeRO on a pipeline, after the tied sums: reduce-scatter each gradient
// ZeRO shards over data into its chunk, all-reduce the others.
void PipelineEngine::reduce_scatter_accumulated_gradients() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    const StoredParam& p = *held_[i];
    float* acc = accumulator_of_.at(p.name);
    if (p.zero)
      reduce_scatter_flat(p, acc, const_cast<float*>(slots_[i].grad));
    else if (!model().data_axis().empty())
      ctx_.groups()
          .axis(model().data_axis())
          .all_reduce(acc, p.value_numel, ReduceKind::kSum, "gradients");
  }
}

// Gradients of the whole batch from the accumulated micro-batch partials,
// then one optimizer update of the parameters this rank holds.
void PipelineEngine::update(int microbatch) {
  if (versions_) return asynchronous_update(microbatch);
  reduce_accumulated_gradients(1.0f);
  update_slots(/*stage_only=*/false, 0);
}

double PipelineEngine::train_step(int64_t step) {
  step_ = step;
  model().executor().set_step(step);  // dropout masks are keyed by the step
  zero_accumulators();
  last_stepped_microbatch_.reset();
  const double loss = model().run_step();
  if (step_ > 0) {  // the first step pays one-time costs (page faults, thread start)
    busy_seconds_ += model().last_outcome().busy_seconds;
    makespan_seconds_ += model().last_outcome().compute_end;
    ++timed_steps_;
  }
  return loss;
}

void PipelineEngine::zero_accumulators() {
  backend_.fill_zero(reinterpret_cast<float*>(grad_accumulators_.data()), accumulator_elements_);
}

double PipelineEngine::evaluate(std::vector<float>* logits) {
  const int microbatches = model().eval_microbatches();
  double loss = 0;
  if (logits) logits->clear();
  for (int mb = 0; mb < microbatches; ++mb) {
    loss += model().evaluate(mb);
    if (logits) append_eval_logits(*logits);
  }
  return loss / microbatches;
}

// The last stage's ranks hold the micro-batch's logits; every rank gets them
// whole, after those of the micro-batches before (consecutive batch rows).
void PipelineEngine::append_eval_logits(std::vector<float>& logits) {
  Shape shape;
  Sharding sharding;
  std::vector<float> block;
  const bool holds = model().eval_logits(&shape, &sharding, &block);
  const float* local = holds ? block.data() : nullptr;
  float numel = local ? static_cast<float>(shape.numel()) : 0.0f;
  ctx_.world().all_reduce(&numel, 1, ReduceKind::kMax, "logits size");
  const size_t offset = logits.size();
  logits.resize(offset + static_cast<size_t>(numel));
  if (!local) {  // any shape of that size; only the holders write
    shape = Shape{{"n", static_cast<int64_t>(numel)}};
    sharding = Sharding::replicated(ctx_.mesh().axes().size());
  }
  const int last = model().schedule().rank_of_stage(model().schedule().stages() - 1);
  ctx_.gather_full(shape, sharding, local, logits.data() + offset, model().pipe_axis(), last);
}

// Every rank drives every gather (world collectives) in the writer's order;
// the first pipeline rank holding a parameter contributes it.
CheckpointSource PipelineEngine::checkpoint_source(int64_t step) {
  using Part = CheckpointSource::Part;
  CheckpointSource source;
  const bool moments = step > 0 && compiled_.config.optimizer == "adamw";
  // (parameter, pipeline rank whose copy) of each tensor written.
  std::vector<std::pair<size_t, int>> holder;
  const std::vector<PipelineParam>& params = model().params();
  for (size_t i = 0; i < params.size(); ++i) {
    source.params.push_back({params[i].name, params[i].shape, moments});
    holder.emplace_back(i, params[i].pipe_ranks.front());
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
  // Each local part is copied to one host buffer (a flat moment gathered
  // over data into its idle accumulator first), then gathered whole.
  auto full = std::make_shared<AlignedBuffer>(storage_.full_tensor);
  int64_t local_numel = 1;
  for (const StoredParam* p : held_)
    local_numel = std::max({local_numel, p->value_numel, p->state_numel});
  auto host = std::make_shared<std::vector<float>>(local_numel);
  source.full = [this, full, host, holder](size_t t, Part part) -> const float* {
    const auto [i, coord] = holder[t];
    const PipelineParam& p = model().params()[i];
    const float* local = nullptr;
    float* acc = nullptr;
    if (p.held) {
      const size_t k = held_index_.at(p.name);
      const ParamEntry& e = params_->entries()[k];
      if (part == Part::kValue) {
        e.value.read(host->data());
        local = host->data();
      } else {
        if (p.zero) acc = accumulator_of_.at(p.name);
        local = moment_block(k, part == Part::kM ? e.m : e.v, acc, host->data());
      }
    }
    ctx_.gather_full(p.shape, p.sharding, local, full->as<float>(), model().pipe_axis(), coord);
    // Between steps the accumulators are zero (asynchronous schedules rely on it).
    if (acc) backend_.fill_zero(acc, held_[held_index_.at(p.name)]->value_numel);
    return full->as<float>();
  };
  return source;
}

void PipelineEngine::load(const std::string& dir, int64_t step) {
  load_shards(dir);
  const std::string tied_path = (std::filesystem::path(dir) / "tied_copies.safetensors").string();
  if (versions_ && std::filesystem::exists(tied_path)) {  // this stage's own copy of a tie
    SafetensorsReader tied(tied_path);  // this rank's blocks only, like the model files
    for (const PipelineParam& p : model().params()) {
      if (!p.held || p.pipe_ranks.front() == model().pipe_rank()) continue;
      const std::string name = tied_copy_name(p.name, model().pipe_rank());
      ParamEntry& dst = params_->at(p.name);
      auto load = [&](const std::string& tensor, std::vector<float>& block) {
        return read_tensor_block(tied, tensor, p.shape, block_of(p.shape, p.sharding), block);
      };
      std::vector<float> block;
      if (!load(name, block)) continue;  // saved on another pipeline
      dst.value.write(block.data());
      if (dst.m.nbytes() > 0)
        for (auto [part, into] : {std::pair{".m", &dst.m}, std::pair{".v", &dst.v}}) {
          load(name + part, block);  // the block; a ZeRO moment is this rank's chunk of it
          write_moment(*held_[held_index_.at(p.name)], block.data(), *into);
        }
    }
  }
  if (versions_) {  // drained at the step boundary: only the update count and last lr carry over
    updates_ = step * updates_per_step_;
    if (step > 0) versions_->on_update(updates_, learning_rate(compiled_.config, step - 1));
  }
}

PipelineStats PipelineEngine::stats() {
  PipelineStats stats;
  const int world = ctx_.mesh().rank_count();
  // Each rank's compute time and the end of its last compute, summed over steps.
  float mine[2] = {static_cast<float>(busy_seconds_), static_cast<float>(makespan_seconds_)};
  std::vector<float> all(2 * world);
  ctx_.world().all_gather(mine, all.data(), 2, "pipeline timing");
  double makespan = 0;
  for (int r = 0; r < world; ++r) makespan = std::max<double>(makespan, all[2 * r + 1]);
  const SimulatedTimeline theory = simulate_schedule(model().schedule());
  for (int r = 0; r < world; ++r) {
    const int p = model().pipe_axis() ? ctx_.mesh().coords(r)[*model().pipe_axis()] : 0;
    stats.pipe_rank.push_back(p);
    stats.measured_bubble.push_back(makespan > 0 ? 1.0 - all[2 * r] / makespan : 0.0);
    stats.theoretical_bubble.push_back(theory.bubble_fraction.at(p));
  }
  stats.steps = timed_steps_;
  float versions = versions_ ? static_cast<float>(versions_->peak_versions()) : 1.0f;
  std::vector<float> all_versions(world);
  ctx_.world().all_gather(&versions, all_versions.data(), 1, "weight versions");
  for (float v : all_versions) stats.weight_versions.push_back(static_cast<int>(v));
  return stats;
}

void PipelineEngine::write_trace(const std::string& path) {
  // Every rank's events, padded to the longest, gathered as 7 floats each
  // (times as a float and its remainder, so microseconds survive long runs).
  constexpr int kFields = 7;
  const std::vector<TraceEvent>& mine = model().executor().trace();
  float count = static_cast<float>(mine.size());
  ctx_.world().all_reduce(&count, 1, ReduceKind::kMax, "trace length");
  const int64_t n = static_cast<int64_t>(count) * kFields;
  std::vector<float> packed(n, -1.0f);
  for (size_t i = 0; i < mine.size(); ++i) {
    const TraceEvent& e = mine[i];
    float* f = &packed[i * kFields];
    f[0] = static_cast<float>(e.kind);
    f[1] = static_cast<float>(e.microbatch.value_or(-1));  // -1 on the wire: none
    f[2] = static_cast<float>(e.stage.value_or(-1));
    f[3] = static_cast<float>(e.start);
    f[4] = static_cast<float>(e.start - f[3]);
    f[5] = static_cast<float>(e.end);
    f[6] = static_cast<float>(e.end - f[5]);
  }
  const int world = ctx_.mesh().rank_count();
  std::vector<float> all(n * world);
  ctx_.world().all_gather(packed.data(), all.data(), n, "trace");
  if (!ctx_.is_root()) return;
  std::vector<std::vector<TraceEvent>> per_rank(world);
  std::vector<std::string> names;
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; i += kFields) {
      const float* f = &all[r * n + i];
      if (f[0] < 0) break;
      auto present = [](float v) {
        return v < 0 ? std::nullopt : std::optional<int>(static_cast<int>(v));
      };
      per_rank[r].push_back({static_cast<int>(f[0]), present(f[1]), present(f[2]),
                             double(f[3]) + f[4], double(f[5]) + f[6]});
    }
    std::string name = "rank " + std::to_string(r);
    if (model().pipe_axis())
      name += " (pipe " + std::to_string(ctx_.mesh().coords(r)[*model().pipe_axis()]) + ")";
    names.push_back(name);
  }
  write_file_atomically(path, chrome_trace_json(per_rank, names));
}

}  // namespace tessel
