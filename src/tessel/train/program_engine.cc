#include "tessel/train/program_engine.h"

#include <cstring>
#include <optional>

#include "tessel/base/error.h"
#include "tessel/ir/model_contract.h"
#include "tessel/train/fault_inject.h"

namespace tessel {

ProgramEngine::ProgramEngine(CompiledRank compiled, DistributedContext& ctx, Optimizer optimizer)
    : Engine(std::move(compiled), ctx, std::move(optimizer)) {
  CompiledProgram& train = compiled_.train;
  if (const int data = ctx_.layout().axis_of(kBatchDim); compiled_.config.zero > 0 && data >= 0)
    zero_axis_ = data;
  init_params();
  for (ParamEntry& e : params_->entries()) {
    train.program->bind_param(e.name, e.value.f32());
    compiled_.eval.program->bind_param(e.name, e.value.f32());
  }
  if (fault_armed(FaultPoint::kBackward)) {  // the first instruction past the loss
    const ValueId loss = train.local.local_of[train.outputs.loss];
    train.program->set_progress_hook([this, loss] {
      const std::optional<ValueId> at = compiled_.train.program->running_node();
      if (at && *at > loss) fault_point(FaultPoint::kBackward, step_);
    });
  }
  slice_buffer_ = AlignedBuffer(storage_.zero_slice);
  // Each update covers the local parameter, or under ZeRO this rank's
  // contiguous slice of its leading dim (where its gradient shard is).
  for (size_t i = 0; i < held_.size(); ++i) {
    ParamEntry& e = params_->entries()[i];
    const int64_t n = held_[i]->state_numel;
    float* param = e.value.f32();
    if (n != e.value.numel()) param += ctx_.coords()[*zero_axis_] * n;
    const float* grad = train.program->device_f32(train.local.local_of[compiled_.grads[i]]);
    slots_.push_back({param, grad, n, &e});
  }
}

void ProgramEngine::feed(CompiledProgram& c) {
  for (ValueId id : c.global.inputs()) {
    const Node& n = c.global.node(id);
    // A bitwise copy of this rank's block (token ids travel as raw 32-bit words).
    const size_t bytes = c.program->value_bytes(c.program->input_id(n.name));
    feed_block_.resize(bytes / sizeof(float));
    ctx_.slice_local(n.shape, c.local.sharding_of[id], static_cast<const float*>(input(n.name)),
                     feed_block_.data());
    c.program->write_input(n.name, feed_block_.data(), bytes);
  }
}

double ProgramEngine::train_step(int64_t step) {
  step_ = step;
  compiled_.train.program->set_step(step);  // dropout masks are keyed by the step
  feed(compiled_.train);
  fault_point(FaultPoint::kForward, step_);
  compiled_.train.program->run();
  const double loss = compiled_.train.program->read_scalar(
      compiled_.train.local.local_of[compiled_.train.outputs.loss]);
  last_update_ = optimizer_(
      slots_, [this](const std::vector<double>& sq) { return sum_of_squares(sq, false); }, 0);
  gather_updated_slices();
  return loss;
}

// After a sharded update (stages 1, 2) every rank of the data axis holds one
// updated slice; an all-gather restores the whole parameter everywhere. At
// stage 3 a rank stores only its slice (the update covered all of it), so
// nothing is gathered here: the next step gathers on use.
void ProgramEngine::gather_updated_slices() {
  if (!zero_axis_) return;
  Communicator& comm = ctx_.groups().axis(ctx_.mesh().axis(*zero_axis_).name);
  for (const UpdateSlot& slot : slots_) {
    ParamEntry& e = *slot.state;
    if (slot.n == e.value.numel()) continue;
    float* slice = slice_buffer_.as<float>();
    std::memcpy(slice, slot.param, slot.n * sizeof(float));
    comm.all_gather(slice, e.value.f32(), slot.n, "zero parameter gather " + e.name);
  }
}

double ProgramEngine::evaluate(std::vector<float>* logits) {
  CompiledProgram& eval = compiled_.eval;
  feed(eval);
  eval.program->run();
  const double loss = eval.program->read_scalar(eval.local.local_of[eval.outputs.loss]);
  if (logits) {
    TS_CHECK(eval.outputs.logits, "model '", compiled_.config.model, "' has no logits");
    const ValueId id = *eval.outputs.logits;
    const Shape& shape = eval.global.node(id).shape;
    logits->resize(shape.numel());
    const std::vector<float> block = eval.program->read_f32(eval.local.local_of[id]);
    ctx_.gather_full(shape, eval.local.sharding_of[id], block.data(), logits->data());
  }
  return loss;
}

// A tensor this rank holds whole is read from its storage; a sharded one is
// gathered into one full-tensor buffer (every rank, in the writer's order).
CheckpointSource ProgramEngine::checkpoint_source(int64_t) {
  using Part = CheckpointSource::Part;
  CheckpointSource source;
  for (size_t i = 0; i < held_.size(); ++i)
    source.params.push_back(
        {held_[i]->name, held_[i]->shape, params_->entries()[i].m.nbytes() > 0});
  auto full = std::make_shared<AlignedBuffer>(storage_.full_tensor);
  source.full = [this, full](size_t i, Part part) -> const float* {
    const StoredParam& p = *held_[i];
    const Sharding& s = part == Part::kValue ? p.value : p.state;
    ParamEntry& e = params_->entries()[i];
    float* local = part == Part::kValue ? e.value.f32() : part == Part::kM ? e.m.f32() : e.v.f32();
    if (s.local_shape(p.shape, ctx_.mesh()).numel() == p.shape.numel()) return local;
    ctx_.gather_full(p.shape, s, local, full->as<float>());
    return full->as<float>();
  };
  // Snapshots: every tensor placed into one buffer, one world sum.
  source.place = [this](size_t i, Part part, float* zeroed_full) {
    const StoredParam& p = *held_[i];
    const Sharding& s = part == Part::kValue ? p.value : p.state;
    ParamEntry& e = params_->entries()[i];
    const float* local = part == Part::kValue ? e.value.f32()
                         : part == Part::kM   ? e.m.f32()
                                              : e.v.f32();
    ctx_.place_primary(p.shape, s, local, zeroed_full);
  };
  source.sum = [this](float* data, int64_t n) {
    return ctx_.world().start_all_reduce(data, n, "checkpoint snapshot");
  };
  source.sharded = [this](size_t i, Part part) {
    const StoredParam& p = *held_[i];
    const Sharding& s = part == Part::kValue ? p.value : p.state;
    return s.local_shape(p.shape, ctx_.mesh()).numel() < p.shape.numel();
  };
  return source;
}

void ProgramEngine::load(const std::string& dir, int64_t) { load_shards(dir); }

}  // namespace tessel
