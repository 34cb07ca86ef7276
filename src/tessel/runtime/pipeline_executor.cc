#include "tessel/runtime/pipeline_executor.h"

#include <map>
#include <optional>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/runtime/transfer_staging.h"

namespace tessel {

constexpr int kForwardPhase = 0, kBackwardInputPhase = 1, kBackwardWeightPhase = 2;
constexpr int kActivation = 0, kGradient = 1;
// Tags repeat every kTagMicrobatches micro-batches; MPI keeps messages with
// equal tags between two ranks in order, and no schedule keeps that many in
// flight between two stages.
constexpr int kTagMicrobatches = 64;
constexpr int kTagValues = 4;

int instances_needed(const Schedule& schedule, int pipe_rank, int chunk) {
  int live = 0, peak = 0;
  for (const Action& a : schedule.actions.at(pipe_rank)) {
    if (a.chunk != chunk) continue;
    if (a.kind == ActionKind::kForward) peak = std::max(peak, ++live);
    if (a.kind == ActionKind::kBackward || a.kind == ActionKind::kBackwardWeight) --live;
  }
  return std::max(peak, 1);
}

PipelineExecutor::PipelineExecutor(const Schedule& schedule, int pipe_rank,
                                   std::vector<PipelineStage> stages, Communicator* pipe, Feed feed,
                                   OnStep on_step, const TransferStaging* staging)
    : schedule_(schedule),
      pipe_rank_(pipe_rank),
      stages_(std::move(stages)),
      pipe_(pipe),
      staging_(staging),
      feed_(std::move(feed)),
      on_step_(std::move(on_step)),
      epoch_(steady_seconds()) {
  // Large sends move only while this rank is inside MPI: poll them between
  // the instructions of whatever runs meanwhile.
  for (PipelineStage& s : stages_)
    for (auto& program : s.instances) program->set_progress_hook([this] { poll_sends(); });
  for (const PipelineStage& s : stages_) {
    TS_CHECK(!s.instances.empty(), "pipeline stage ", s.stage, " has no compiled program");
    instance_of_.emplace_back(schedule_.microbatches, -1);
    busy_.emplace_back(s.instances.size(), false);
    pending_.emplace_back(s.instances.size());
    for (size_t i = 0; i < s.activations_in.size() + s.activations_out.size(); ++i)
      TS_CHECK(i < kTagValues, "pipeline stage ", s.stage, " exchanges more than ", kTagValues,
               " values");
  }
  // A micro-batch's instance is free after its last action on the stage
  // (a backward's gradient send comes after the backward).
  const std::vector<Action>& actions = schedule_.actions.at(pipe_rank_);
  last_use_.assign(actions.size(), false);
  std::map<std::pair<int, int>, size_t> last;
  for (size_t i = 0; i < actions.size(); ++i)
    if (actions[i].kind != ActionKind::kOptimizerStep)
      last[{actions[i].chunk, actions[i].microbatch}] = i;
  for (const auto& [key, i] : last) last_use_[i] = true;
  trace_.reserve(4 * actions.size());
}

void PipelineExecutor::set_step(int64_t step) {
  for (PipelineStage& s : stages_)
    for (auto& program : s.instances) program->set_step(step);
}

PipelineStage& PipelineExecutor::stage_of_chunk(int chunk) {
  for (PipelineStage& s : stages_)
    if (s.chunk == chunk) return s;
  TS_THROW("pipeline rank ", pipe_rank_, " holds no chunk ", chunk);
}

Program& PipelineExecutor::acquire(PipelineStage& s, int microbatch) {
  const size_t index = &s - stages_.data();
  int& inst = instance_of_[index][microbatch];
  if (inst >= 0) return *s.instances[inst];
  for (size_t i = 0; i < s.instances.size(); ++i) {
    if (busy_[index][i]) continue;
    for (auto& request : pending_[index][i]) request->wait();
    pending_[index][i].clear();
    busy_[index][i] = true;
    inst = static_cast<int>(i);
    return *s.instances[i];
  }
  TS_THROW("pipeline stage ", s.stage, ": micro-batch ", microbatch, " needs an instance but all ",
           s.instances.size(),
           " hold micro-batches in flight (the schedule keeps more in flight than was compiled)");
}

void PipelineExecutor::release(PipelineStage& s, int microbatch) {
  const size_t index = &s - stages_.data();
  int& inst = instance_of_[index][microbatch];
  busy_[index][inst] = false;
  inst = -1;
}

// Tags of the values of one (micro-batch, receiving stage, direction) are
// the returned base plus the value's index.
int PipelineExecutor::tag_base(int microbatch, int stage, int direction) const {
  return (((microbatch % kTagMicrobatches) * schedule_.stages() + stage) * 2 + direction) *
         kTagValues;
}

void PipelineExecutor::receive(Program& p, const std::vector<ValueId>& values, const Action& a,
                               int tag) {
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t n = p.graph().node(values[i]).shape.numel();
    float* to = staging_ ? staging_->receive_buffer(n) : p.device_f32(values[i]);
    pipe_->recv(to, n, a.peer, tag + static_cast<int>(i), action_name(a.kind));
    if (staging_)
      staging_->backend().copy_from_host(p.device_f32(values[i]), to, n * sizeof(float));
  }
}

void PipelineExecutor::send(size_t stage, size_t instance, const std::vector<ValueId>& values,
                            size_t first, const Action& a, int tag,
                            std::vector<std::unique_ptr<CommRequest>>& pending) {
  Program& p = *stages_[stage].instances[instance];
  for (size_t i = 0; i < values.size(); ++i) {
    const int64_t n = p.graph().node(values[i]).shape.numel();
    const float* from = p.device_f32(values[i]);
    if (staging_) {
      float* mirror = staging_->send_mirror(stage, instance, first + i, n);
      staging_->backend().copy_to_host(mirror, from, n * sizeof(float));
      from = mirror;
    }
    pending.push_back(
        pipe_->start_send(from, n, a.peer, tag + static_cast<int>(i), action_name(a.kind)));
  }
}

void PipelineExecutor::poll_sends() {
  for (auto& per_stage : pending_)
    for (auto& per_instance : per_stage)
      for (auto& request : per_instance)
        if (request) request->test();
}

void PipelineExecutor::weights_changed() {
  for (PipelineStage& s : stages_)
    if (!s.instances.empty()) s.instances.front()->weights_changed();  // instances share copies
}

PipelineExecutor::StepOutcome PipelineExecutor::run() {
  StepOutcome out;
  const double start = steady_seconds();
  const std::vector<Action>& actions = schedule_.actions.at(pipe_rank_);
  // Transfers between stages read and write device memory until the last
  // send completes at the end of the step.
  std::optional<DeviceAccess> access;
  if (!stages_.empty() && !stages_.front().instances.empty())
    access.emplace(stages_.front().instances.front()->backend());
  // The weights may have changed since the last step (a checkpoint load, an
  // update outside the action list): shared bf16 copies are made afresh.
  weights_changed();
  for (size_t ai = 0; ai < actions.size(); ++ai) {
    const Action& a = actions[ai];
    const double t0 = steady_seconds();
    if (a.kind == ActionKind::kOptimizerStep) {
      // Sends still in flight read activations, never parameters; step now.
      on_step_(a.microbatch);
      weights_changed();
      if (tracing)
        trace_.push_back({static_cast<int>(a.kind),
                          a.microbatch >= 0 ? std::optional<int>(a.microbatch) : std::nullopt,
                          std::nullopt, t0 - epoch_, steady_seconds() - epoch_});
      continue;
    }
    PipelineStage& s = stage_of_chunk(a.chunk);
    Program& p = acquire(s, a.microbatch);
    p.set_microbatch(a.microbatch);  // dropout masks: the micro-batch's global rows
    const size_t index = &s - stages_.data();
    const size_t instance = instance_of_[index][a.microbatch];
    auto& pending = pending_[index][instance];
    // The activation a forward sent shares bytes with what the backward
    // receives and computes (CompileOptions::sent_outputs): its send
    // completes first (the next stage consumed it before it sends this
    // micro-batch's gradient, so this never waits on this rank).
    if (a.kind == ActionKind::kRecvGradient || a.kind == ActionKind::kBackward ||
        a.kind == ActionKind::kBackwardInput) {
      for (auto& request : pending) request->wait();
      pending.clear();
    }
    switch (a.kind) {
      case ActionKind::kRecvActivation:
        receive(p, s.activations_in, a, tag_base(a.microbatch, s.stage, kActivation));
        break;
      case ActionKind::kSendActivation:
        send(index, instance, s.activations_out, 0, a,
             tag_base(a.microbatch, s.stage + 1, kActivation), pending);
        break;
      case ActionKind::kRecvGradient:
        receive(p, s.gradients_in, a, tag_base(a.microbatch, s.stage, kGradient));
        break;
      case ActionKind::kSendGradient:
        send(index, instance, s.gradients_out, s.activations_out.size(), a,
             tag_base(a.microbatch, s.stage - 1, kGradient), pending);
        break;
      case ActionKind::kForward:
        if (hooks_.before_forward) hooks_.before_forward(index, a.microbatch, p);
        feed_(s.stage, a.microbatch, p);
        p.run_phase(kForwardPhase);
        if (s.loss) out.loss_sum += p.read_scalar(*s.loss);
        break;
      case ActionKind::kBackwardInput:
        if (hooks_.before_backward) hooks_.before_backward(index, a.microbatch, p);
        p.run_phase(kBackwardInputPhase);
        break;
      case ActionKind::kBackward:
        if (hooks_.before_backward) hooks_.before_backward(index, a.microbatch, p);
        p.run_phase(kBackwardInputPhase);
        p.run_phase(kBackwardWeightPhase);
        break;
      case ActionKind::kBackwardWeight:
        p.run_phase(kBackwardWeightPhase);
        break;
      case ActionKind::kOptimizerStep:
        break;
    }
    if (last_use_[ai]) {
      if (hooks_.released) hooks_.released(index, a.microbatch, p);
      release(s, a.microbatch);
    }
    const double t1 = steady_seconds();
    if (is_compute(a.kind)) {
      out.busy_seconds += t1 - t0;
      out.compute_end = t1 - start;
    }
    if (tracing)
      trace_.push_back({static_cast<int>(a.kind), a.microbatch, s.stage, t0 - epoch_, t1 - epoch_});
  }
  for (auto& per_stage : pending_)
    for (auto& per_instance : per_stage) {
      for (auto& request : per_instance) request->wait();
      per_instance.clear();
    }
  out.seconds = steady_seconds() - start;
  return out;
}

}  // namespace tessel
