#include "tessel/train/program_engine.h"

#include <algorithm>
#include <optional>

#include "tessel/base/error.h"
#include "tessel/ir/model_contract.h"
#include "tessel/train/fault_inject.h"

namespace tessel {

ProgramEngine::ProgramEngine(CompiledRank compiled, DistributedContext& ctx, Optimizer optimizer)
    : Engine(std::move(compiled), ctx, std::move(optimizer)) {
  CompiledProgram& train = compiled_.train;
  init_params();
  for (ParamEntry& e : params_->entries()) {
    train.program->bind_param(e.name, e.value.device_f32());
    compiled_.eval.program->bind_param(e.name, e.value.device_f32());
  }
  if (fault_armed(FaultPoint::kBackward)) {  // the first instruction past the loss
    const ValueId loss = train.local.local_of[train.outputs.loss];
    train.program->set_progress_hook([this, loss] {
      const std::optional<ValueId> at = compiled_.train.program->running_node();
      if (at && *at > loss) fault_point(FaultPoint::kBackward, step_);
    });
  }
  // Each update covers the local parameter, or under ZeRO this rank's flat
  // chunk of it (compile/zero.h).
  for (size_t i = 0; i < held_.size(); ++i)
    slots_.push_back(zero_slot(i,
                               train.program->device_f32(train.local.local_of[compiled_.grads[i]]),
                               held_[i]->grad_is_chunk));
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
  update_slots(/*stage_only=*/false, 0);
  return loss;
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

// Every part is first copied out of device memory into one host buffer of
// this rank's local elements (a ZeRO moment gathered over data into the
// padded-block buffer first); a tensor
// this rank holds whole is that copy, a sharded one is gathered into one
// full-tensor buffer (every rank, in the writer's order).
CheckpointSource ProgramEngine::checkpoint_source(int64_t) {
  using Part = CheckpointSource::Part;
  CheckpointSource source;
  int64_t local_numel = 1;
  for (size_t i = 0; i < held_.size(); ++i) {
    source.params.push_back(
        {held_[i]->name, held_[i]->shape, params_->entries()[i].m.nbytes() > 0});
    local_numel = std::max({local_numel, held_[i]->value_numel, held_[i]->state_numel});
  }
  auto full = std::make_shared<AlignedBuffer>(storage_.full_tensor);
  auto host = std::make_shared<std::vector<float>>(local_numel);
  auto local_on_host = [this, host](size_t i, Part part) -> const float* {
    ParamEntry& e = params_->entries()[i];
    if (part == Part::kValue) {
      e.value.read(host->data());
      return host->data();
    }
    return moment_block(i, part == Part::kM ? e.m : e.v,
                        reinterpret_cast<float*>(zero_block_.data()), host->data());
  };
  source.full = [this, full, local_on_host](size_t i, Part part) -> const float* {
    const StoredParam& p = *held_[i];
    const Sharding& s = part == Part::kValue || p.zero ? p.value : p.state;
    const float* local = local_on_host(i, part);
    if (s.local_shape(p.shape, ctx_.mesh()).numel() == p.shape.numel()) return local;
    ctx_.gather_full(p.shape, s, local, full->as<float>());
    return full->as<float>();
  };
  // Snapshots: every tensor placed into one buffer, one world sum.
  source.place = [this, local_on_host](size_t i, Part part, float* zeroed_full) {
    const StoredParam& p = *held_[i];
    const Sharding& s = part == Part::kValue || p.zero ? p.value : p.state;
    ctx_.place_primary(p.shape, s, local_on_host(i, part), zeroed_full);
  };
  source.sum = [this](float* data, int64_t n) {
    return ctx_.world().start_all_reduce(data, n, "checkpoint snapshot");
  };
  source.sharded = [this](size_t i, Part part) {
    const StoredParam& p = *held_[i];
    if (part != Part::kValue && p.zero) return true;  // chunks gathered over data
    const Sharding& s = part == Part::kValue ? p.value : p.state;
    return s.local_shape(p.shape, ctx_.mesh()).numel() < p.shape.numel();
  };
  return source;
}

void ProgramEngine::load(const std::string& dir, int64_t) { load_shards(dir); }

}  // namespace tessel
