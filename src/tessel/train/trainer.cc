#include "tessel/train/trainer.h"

#include <chrono>
#include <utility>

#include "tessel/base/error.h"
#include "tessel/compile/cuda_gate.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/checkpoint_tokenizer.h"
#include "tessel/train/checkpoint/run_state.h"
#include "tessel/train/fault_inject.h"
#include "tessel/train/host_memory.h"
#include "tessel/train/threads.h"

namespace tessel {
namespace {

// Seconds since `t`, and `t` moved to now.
double lap(std::chrono::steady_clock::time_point& t) {
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

// A learning rate set by set_lr, as run_state records it (0: none).
double saved_lr_override(const std::string& dir, const nlohmann::json& state) {
  const nlohmann::json schedule = state.value("lr_schedule", nlohmann::json::object());
  if (!schedule.is_object() || !schedule.contains("override")) return 0;
  const nlohmann::json& lr = schedule["override"];
  if (!lr.is_number() || !(lr.get<double>() > 0))
    TS_THROW("checkpoint '", dir, "': lr_schedule.override must be a number > 0, got ", lr.dump());
  return lr.get<double>();
}

}  // namespace

Trainer::~Trainer() = default;

Trainer::Trainer(const TrainConfig& config) : config_(config) {
  config_.validate();
  threads_ = apply_threads(config_.threads);
  backend_ = &backend_for(config_.device);  // a missing device is an error before any compute
  refuse_unrunnable_device(config_);
  auto t = std::chrono::steady_clock::now();
  std::optional<CollectiveStaging> staging;
  if (stages_collectives(config_)) staging = CollectiveStaging{backend_, staging_piece(config_)};
  ctx_ = std::make_unique<DistributedContext>(config_.mesh, config_.layout, staging);
  startup_.mesh = lap(t);
  arm_fault_injection(ctx_->rank());
  ctx_->layout() = layout_for(config_, ctx_->mesh());  // overrides, context parallelism
  recompute_choice_ = resolve_recompute(config_);
  check_memory_limit(config_);  // before the data is loaded or an arena allocated
  task_ = make_task(config_);
  startup_.data = lap(t);
  check_fits_host();  // a run's compile allocates the arena
  CompiledRank compiled = compile_rank(config_, ctx_->mesh(), ctx_->layout(), ctx_->rank(),
                                       CompileMode::kRun, ctx_.get());
  startup_.compile = lap(t);
  // The layout resolved against the model (defaults it lacks dropped), as reported.
  if (!compiled.pipelined()) ctx_->layout() = compiled.layout;
  global_flops_ = compiled.flops_per_step;
  // The optimizer: one update of the slots the engine hands over, at the
  // current step's learning rate.
  auto optimizer = [this](const std::vector<UpdateSlot>& slots, const GlobalSumOfSquares& sum,
                          int64_t updates, const OffloadStaging& staging) {
    if (keep_gradients_)
      for (const UpdateSlot& s : slots) {
        std::vector<float>& kept = gradients_[s.state->name];
        kept.resize(s.n);
        backend_->copy_to_host(kept.data(), s.grad, s.n * sizeof(float));
      }
    UpdateStats u =
        apply_update(config_, *backend_, slots, step_, sum, updates, lr_override_, staging);
    fault_point(FaultPoint::kOptimizer, step_);
    return u;
  };
  engine_ = Engine::create(std::move(compiled), *ctx_, optimizer);
  startup_.engine = lap(t);
}

void Trainer::check_fits_host() const {
  const CompiledRank planned = compile_rank(config_, ctx_->mesh(), ctx_->layout(), ctx_->rank(),
                                            CompileMode::kPlanOnly, nullptr);
  const RankMemory mine = predict_rank_memory(planned);
  const HostShare share = share_of_this_host(ctx_->world(), host_bytes_of(mine, config_.device));
  check_host_memory(mine, config_.device, share, host_memory_bytes());
}

PipelineEngine* Trainer::pipeline_engine() const {
  return dynamic_cast<PipelineEngine*>(engine_.get());
}

size_t Trainer::arena_bytes() const { return engine_->arena_bytes(); }

size_t Trainer::eval_arena_bytes() const { return engine_->eval_arena_bytes(); }

Program& Trainer::train_program() {
  if (pipeline_engine())
    TS_THROW("a pipelined or micro-batched run has one program per stage, not one");
  return *engine_->compiled().train.program;
}

StepResult Trainer::step() {
  auto input = [this](const std::string& name) { return engine_->input(name); };
  auto t = std::chrono::steady_clock::now();
  task_->fill_batch(input, Split::kTrain, step_, config_.batch);
  const double data_ms = lap(t) * 1e3;
  nlohmann::json data = task_->train_batch_info(step_);
  StepResult r = step(nullptr);
  r.data_ms = data_ms;
  r.data = std::move(data);
  return r;
}

StepResult Trainer::step(const BatchFiller& fill) {
  StepResult r;
  auto t = std::chrono::steady_clock::now();
  if (fill)
    for (auto& [name, staged] : engine_->staged_inputs()) fill(name, staged);
  r.data_ms = lap(t) * 1e3;
  r.step = step_;
  engine_->check_input_ids();
  r.loss = engine_->train_step(step_);
  r.grad_norm = engine_->last_update().grad_norm;
  r.lr = engine_->last_update().lr;
  ++step_;
  return r;
}

EvalResult Trainer::evaluate() {
  auto input = [this](const std::string& name) { return engine_->input(name); };
  double loss = 0, accuracy = 0;
  std::vector<float> logits;
  for (int64_t i = 0; i < config_.eval_batches; ++i) {
    task_->fill_batch(input, Split::kVal, i, config_.batch);
    loss += engine_->evaluate(task_->has_accuracy() ? &logits : nullptr);
    if (task_->has_accuracy()) accuracy += task_->accuracy(logits.data(), input, config_.batch);
  }
  const double n = static_cast<double>(config_.eval_batches);
  return {loss / n, task_->has_accuracy() ? std::optional(accuracy / n) : std::nullopt};
}

int64_t Trainer::parameter_count() const { return engine_->parameter_count(); }

Trainer::ModelStateBytes Trainer::model_state_bytes() const {
  ModelStateBytes b;
  for (const ParamEntry& e : engine_->params().entries()) {
    b.parameters += e.value.nbytes();
    b.optimizer += e.m.nbytes() + e.v.nbytes();
  }
  b.gradients = engine_->gradient_bytes();
  return b;
}

CheckpointSource Trainer::checkpoint_source() {
  CheckpointSource source = engine_->checkpoint_source(step_);
  source.state = run_state();
  return source;
}

nlohmann::json Trainer::run_state() const {
  nlohmann::json state = describe_run_state(
      config_, ctx_->mesh().to_string(), ctx_->layout().to_string(), ctx_->world().size(), step_);
  if (std::optional<int64_t> consumed = task_->consumed_samples(step_)) {
    state["data_position"]["consumed_samples"] = *consumed;
    state["data_position"]["note"] =
        "global sample g is a pure function of (seed, g): the next batch starts at sample "
        "consumed_samples, on any number of ranks";
  }
  if (lr_override_ > 0) state["lr_schedule"]["override"] = lr_override_;
  return state;
}

void Trainer::save_checkpoint(const std::string& dir) {
  tessel::save_checkpoint(dir, config_, checkpoint_source(), step_, ctx_->is_root());
}

void Trainer::snapshot_checkpoint(CheckpointSnapshot& snapshot) {
  snapshot.take(checkpoint_source(), ctx_->is_root());
}

void Trainer::reserve_snapshot(CheckpointSnapshot& snapshot) {
  CheckpointSource source = checkpoint_source();
  if (config_.optimizer == "adamw")  // AdamW's moments exist from the first update on
    for (CheckpointSource::Param& p : source.params) p.has_moments = true;
  snapshot.reserve(source, ctx_->is_root());
}

void Trainer::load_checkpoint(const std::string& dir) {
  auto t = std::chrono::steady_clock::now();
  const CheckpointInfo info = read_checkpoint_info(dir);
  const int64_t step = info.step;
  check_resume_tokenizer(dir, config_);
  if (task_->consumed_samples(step)) {  // the data position, before any tensor is loaded
    const nlohmann::json position = info.state.value("data_position", nlohmann::json::object());
    const nlohmann::json consumed =
        position.is_object() ? position.value("consumed_samples", nlohmann::json()) : nullptr;
    if (!consumed.is_number_integer() || consumed.get<int64_t>() < 0)
      TS_THROW("checkpoint '", dir,
               "': its manifest records no valid data_position.consumed_samples (an integer >= "
               "0), which resuming token data needs (a checkpoint of a run on other data?)");
    task_->resume_at(step, consumed.get<int64_t>());
  }
  const double lr_override = saved_lr_override(dir, info.state);
  engine_->load(dir, step);
  step_ = step;
  lr_override_ = lr_override;
  config_.first_step = step;  // the memory prediction: no snapshot if no save follows
  startup_.load = lap(t);
}

void Trainer::set_lr(double lr) {
  if (!(lr >= 0)) TS_THROW("learning rate must be >= 0 (0: the schedule's), got ", lr);
  lr_override_ = lr;
}

Trainer::PipelineStats Trainer::pipeline_stats() {
  PipelineEngine* p = pipeline_engine();
  return p ? p->stats() : PipelineStats{};
}

void Trainer::write_trace(const std::string& path) {
  PipelineEngine* p = pipeline_engine();
  if (!p) TS_THROW("--trace records pipeline actions; this run has no pipeline or micro-batches");
  p->write_trace(path);
}

}  // namespace tessel
