#include "tessel/train/trainer.h"

#include <omp.h>

#include <cstring>

#include "tessel/autodiff/backward.h"
#include "tessel/base/error.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/zero.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/run_state.h"
#include "tessel/train/fault_inject.h"

namespace tessel {

Trainer::~Trainer() = default;

Trainer::Trainer(const TrainConfig& config) : config_(config) {
  config_.validate();
  if (config_.threads > 0) omp_set_num_threads(config_.threads);
  ctx_ = std::make_unique<DistributedContext>(config_.mesh, config_.layout);
  arm_fault_injection(ctx_->rank());
  for (const auto& [label, spec] : config_.shard)
    ctx_->layout().set_override(label, spec, ctx_->mesh());
  recompute_choice_ = resolve_recompute(config_);
  check_memory_limit(config_);  // before the data is loaded or an arena allocated
  task_ = make_task(config_);
  compiled_ = compile_rank(config_, ctx_->mesh(), ctx_->layout(), ctx_->rank(), CompileMode::kRun,
                           ctx_.get());
  global_flops_ = compiled_.flops_per_step;
  if (compiled_.pipelined()) {
    init_pipeline();
    return;
  }
  CompiledProgram& train = compiled_.train;
  grads_ = compiled_.grads;
  zero_axis_ = config_.zero > 0 ? ctx_->layout().axis_of("batch") : -1;

  // Parameters: full initial values from the seed, then this rank's shard
  // (a sharded one goes through a full-size buffer).
  host_bytes_ = host_buffer_bytes(train.global, grads_, train.local, ctx_->mesh(),
                                  config_.optimizer == "adamw");
  params_ = std::make_unique<ParamStore>(train.program->graph());
  const auto& params = train.global.params();
  AlignedBuffer full(host_bytes_.full_tensor);
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& node = train.global.node(params[i]);
    const Sharding& s = train.local.sharding_of[params[i]];
    float* local = params_->at(node.name).value.f32();
    if (s.local_shape(node.shape, ctx_->mesh()).numel() == node.shape.numel()) {
      init_param(node.name, node.init, config_.seed, node.shape.numel(), local);
    } else {
      init_param(node.name, node.init, config_.seed, node.shape.numel(), full.as<float>());
      ctx_->slice_local(node.shape, s, full.as<float>(), local);
    }
    param_sharding_.push_back(s);
    // Optimizer state follows the gradient: sharded over data under ZeRO.
    const Sharding& state = train.local.sharding_of[grads_[i]];
    state_sharding_.push_back(state);
    double copies = 1;
    for (int a = 0; a < state.axis_count(); ++a)
      if (!state[a].is_split()) copies *= ctx_->mesh().axis(a).size;
    replicas_.push_back(copies);
  }
  for (ParamEntry& e : params_->entries()) {
    train.program->bind_param(e.name, e.value.f32());
    compiled_.eval.program->bind_param(e.name, e.value.f32());
  }
  for (ValueId g : grads_) grad_ptrs_.push_back(train.program->f32(train.local.local_of[g]));
  if (fault_armed(FaultPoint::kBackward)) {  // the first instruction past the loss
    const ValueId loss = train.local.local_of[train.outputs.loss];
    train.program->set_progress_hook([this, loss] {
      if (compiled_.train.program->running_node() > loss) fault_point(FaultPoint::kBackward, step_);
    });
  }
  slice_buffer_ = AlignedBuffer(host_bytes_.zero_slice);
  slots_ = update_slots();  // storage is fixed from here on: a step builds nothing
  for (ValueId id : train.global.inputs()) {
    const Node& n = train.global.node(id);
    staging_.emplace(n.name, Tensor(n.shape, n.dtype));
  }
}

void Trainer::feed(CompiledProgram& c, Split split, int64_t index) {
  auto input = [this](const std::string& name) -> void* {
    auto it = staging_.find(name);
    if (it == staging_.end()) TS_THROW("the task wrote input '", name, "', which the model lacks");
    return it->second.raw();
  };
  task_->fill_batch(input, split, index, config_.batch);
  for (ValueId id : c.global.inputs()) {
    const Node& n = c.global.node(id);
    // A bitwise copy of this rank's block (token ids travel as raw 32-bit words).
    ctx_->slice_local(n.shape, c.local.sharding_of[id],
                      static_cast<const float*>(staging_.at(n.name).raw()),
                      static_cast<float*>(c.program->input(n.name)));
  }
}

size_t Trainer::arena_bytes() const {
  return pipe_ ? pipe_->arena_bytes() : compiled_.train.program->arena_bytes();
}

size_t Trainer::eval_arena_bytes() const {
  return pipe_ ? pipe_->eval_arena_bytes() : compiled_.eval.program->arena_bytes();
}

const Program& Trainer::train_program() const {
  if (pipe_) TS_THROW("a pipelined or micro-batched run has one program per stage, not one");
  return *compiled_.train.program;
}

StepResult Trainer::step() {
  // Dropout masks are keyed by the step (runtime/dropout_op.h): tell the programs.
  if (pipe_) {
    pipe_->executor().set_step(step_);
    return pipeline_step();
  }
  compiled_.train.program->set_step(step_);
  feed(compiled_.train, Split::kTrain, step_);
  fault_point(FaultPoint::kForward, step_);
  compiled_.train.program->run();
  StepResult r;
  r.step = step_;
  r.loss =
      *compiled_.train.program->f32(compiled_.train.local.local_of[compiled_.train.outputs.loss]);
  auto global_sum = [this](const std::vector<double>& local_sq) {
    float total = 0;
    for (size_t i = 0; i < local_sq.size(); ++i)
      total += static_cast<float>(local_sq[i] / replicas_[i]);
    fault_point(FaultPoint::kCollective, step_);
    ctx_->world().all_reduce(&total, 1, ReduceKind::kSum, "grad_norm");
    return static_cast<double>(total);
  };
  UpdateStats u = apply_update(config_, slots_, step_, global_sum);
  fault_point(FaultPoint::kOptimizer, step_);
  gather_updated_slices();
  r.grad_norm = u.grad_norm;
  r.lr = u.lr;
  ++step_;
  return r;
}

std::vector<UpdateSlot> Trainer::update_slots() {
  std::vector<UpdateSlot> slots;
  for (size_t i = 0; i < params_->entries().size(); ++i) {
    ParamEntry& e = params_->entries()[i];
    const int64_t n = state_numel(i);
    float* param = e.value.f32();
    if (n != e.value.numel())  // this rank's contiguous slice of the leading dim
      param += ctx_->coords()[zero_axis_] * n;
    slots.push_back({param, grad_ptrs_[i], n, &e});
  }
  return slots;
}

int64_t Trainer::state_numel(size_t i) const {
  const Node& node = compiled_.train.global.node(compiled_.train.global.params()[i]);
  return state_sharding_[i].local_shape(node.shape, ctx_->mesh()).numel();
}

// After a sharded update (stages 1, 2) every rank of the data axis holds one
// updated slice; an all-gather restores the whole parameter everywhere. At
// stage 3 a rank stores only its slice (the update covered all of it), so
// nothing is gathered here: the next step gathers on use.
void Trainer::gather_updated_slices() {
  if (zero_axis_ < 0) return;
  Communicator& comm = ctx_->groups().axis(ctx_->mesh().axis(zero_axis_).name);
  for (size_t i = 0; i < params_->entries().size(); ++i) {
    ParamEntry& e = params_->entries()[i];
    const int64_t n = state_numel(i);
    if (n == e.value.numel()) continue;
    float* slice = slice_buffer_.as<float>();
    std::memcpy(slice, e.value.f32() + ctx_->coords()[zero_axis_] * n, n * sizeof(float));
    comm.all_gather(slice, e.value.f32(), n, "zero parameter gather " + e.name);
  }
}

Trainer::ModelStateBytes Trainer::model_state_bytes() const {
  ModelStateBytes b;
  for (size_t i = 0; i < params_->entries().size(); ++i) {
    const ParamEntry& e = params_->entries()[i];
    b.parameters += e.value.nbytes();
    b.gradients += pipe_ ? e.value.nbytes() : state_numel(i) * sizeof(float);
    b.optimizer += e.m.nbytes() + e.v.nbytes();
  }
  return b;
}

EvalResult Trainer::evaluate() {
  if (pipe_) return pipeline_evaluate();
  EvalResult r;
  double loss = 0, accuracy = 0;
  const ValueId logits = compiled_.eval.outputs.logits;
  const Node& logits_node = compiled_.eval.global.node(logits);
  std::vector<float> full_logits;
  for (int64_t i = 0; i < config_.eval_batches; ++i) {
    feed(compiled_.eval, Split::kVal, i);
    compiled_.eval.program->run();
    loss +=
        *compiled_.eval.program->f32(compiled_.eval.local.local_of[compiled_.eval.outputs.loss]);
    if (!task_->has_accuracy()) continue;
    full_logits.resize(logits_node.shape.numel());
    auto input = [this](const std::string& name) -> void* { return staging_.at(name).raw(); };
    ctx_->gather_full(logits_node.shape, compiled_.eval.local.sharding_of[logits],
                      compiled_.eval.program->f32(compiled_.eval.local.local_of[logits]),
                      full_logits.data());
    accuracy += task_->accuracy(full_logits.data(), input, config_.batch);
  }
  r.loss = loss / config_.eval_batches;
  r.accuracy = task_->has_accuracy() ? accuracy / config_.eval_batches : -1;
  return r;
}

int64_t Trainer::parameter_count() const {
  if (pipe_) return pipeline_parameter_count();
  int64_t n = 0;
  for (ValueId p : compiled_.train.global.params())
    n += compiled_.train.global.node(p).shape.numel();
  return n;
}

CheckpointSource Trainer::checkpoint_source() {
  if (pipe_) return pipeline_checkpoint_source();
  // A tensor this rank holds whole is read from its storage; a sharded one
  // is gathered into one full-tensor buffer (every rank, in the writer's order).
  using Part = CheckpointSource::Part;
  CheckpointSource source;
  const auto& params = compiled_.train.global.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& node = compiled_.train.global.node(params[i]);
    source.params.push_back({node.name, node.shape, params_->entries()[i].m.nbytes() > 0});
  }
  auto full = std::make_shared<AlignedBuffer>(host_bytes_.full_tensor);
  source.full = [this, full, shapes = source.params](size_t i, Part part) -> const float* {
    const Shape& shape = shapes[i].shape;
    const Sharding& s = part == Part::kValue ? param_sharding_[i] : state_sharding_[i];
    ParamEntry& e = params_->entries()[i];
    float* local = part == Part::kValue ? e.value.f32() : part == Part::kM ? e.m.f32() : e.v.f32();
    if (s.local_shape(shape, ctx_->mesh()).numel() == shape.numel()) return local;
    ctx_->gather_full(shape, s, local, full->as<float>());
    return full->as<float>();
  };
  source.state = run_state();
  return source;
}

nlohmann::json Trainer::run_state() const {
  return describe_run_state(config_, ctx_->mesh().to_string(), ctx_->layout().to_string(),
                            ctx_->world().size(), step_);
}

void Trainer::save_checkpoint(const std::string& dir) {
  tessel::save_checkpoint(dir, config_, checkpoint_source(), step_, ctx_->is_root());
}

void Trainer::snapshot_checkpoint(CheckpointSnapshot& snapshot) {
  snapshot.take(checkpoint_source(), ctx_->is_root());
}

void Trainer::load_checkpoint(const std::string& dir) {
  if (pipe_) return pipeline_load(dir);
  // Each rank reads only its own blocks of the file (checkpoint/shard_load.h).
  std::vector<ShardRequest> requests;
  const auto& params = compiled_.train.global.params();
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& node = compiled_.train.global.node(params[i]);
    requests.push_back({node.name, node.shape, true, block_of(node.shape, param_sharding_[i]),
                        block_of(node.shape, state_sharding_[i])});
  }
  ShardedCheckpoint loaded = load_checkpoint_shards(dir, requests);
  for (size_t i = 0; i < params.size(); ++i) {
    ParamEntry& dst = params_->entries()[i];
    std::memcpy(dst.value.raw(), loaded.value[i].data(), dst.value.nbytes());
    if (loaded.m[i].empty()) continue;
    const int64_t n = state_numel(i);
    dst.m = Tensor(Shape{{"state", n}}, DType::kF32);
    dst.v = Tensor(Shape{{"state", n}}, DType::kF32);
    std::memcpy(dst.m.raw(), loaded.m[i].data(), dst.m.nbytes());
    std::memcpy(dst.v.raw(), loaded.v[i].data(), dst.v.nbytes());
  }
  step_ = read_checkpoint_info(dir).step;
}

TensorBlock Trainer::block_of(const Shape& shape, const Sharding& s) const {
  const Shape local = s.local_shape(shape, ctx_->mesh());
  TensorBlock b{s.local_offsets(shape, ctx_->mesh(), ctx_->coords()), {}};
  for (const Dim& d : local.dims()) b.sizes.push_back(d.size);
  return b;
}

}  // namespace tessel
