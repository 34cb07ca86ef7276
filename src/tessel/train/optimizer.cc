#include "tessel/train/optimizer.h"

#include <algorithm>
#include <cmath>

#include "tessel/base/error.h"
#include "tessel/kernels/optimizer.h"

namespace tessel {

double learning_rate(const TrainConfig& c, int64_t step) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / c.warmup_steps;
  if (c.lr_schedule == "constant") return c.lr;
  // The decay's first step: right after the warm-up, or (wsd) after the stable phase.
  int64_t start = c.warmup_steps;
  if (c.lr_schedule == "wsd")
    start = std::max(start, c.steps - static_cast<int64_t>(std::llround(
                                          c.decay_fraction * static_cast<double>(c.steps))));
  if (step < start) return c.lr;
  const int64_t decay_steps = std::max<int64_t>(1, c.steps - start);
  const double progress = std::min(1.0, static_cast<double>(step - start) / decay_steps);
  if (c.lr_schedule == "cosine")
    return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(M_PI * progress));
  return c.lr + (c.min_lr - c.lr) * progress;  // linear, wsd
}

float weight_decay_of(const TrainConfig& c, const ParamEntry& e) {
  return e.decay || c.decay_norms_and_biases ? static_cast<float>(c.weight_decay) : 0.0f;
}

MemorySpace moment_space(const TrainConfig& c) {
  return offloads(c, "optimizer") ? MemorySpace::kPinnedHost : MemorySpace::kDevice;
}

MemorySpace weight_space(const TrainConfig& c) {
  return offloads(c, "weights") ? MemorySpace::kPinnedHost : MemorySpace::kDevice;
}

namespace {

// offload "optimizer": the slot's gradient (and value, unless the weights
// live on the host: staging.value null) copied to the host, AdamW's kernel
// on them and the pinned moments, the value copied back.
void offloaded_adamw(Backend& backend, const UpdateSlot& slot, const OffloadStaging& staging,
                     float lr, const TrainConfig& c, float wd, int64_t step, float grad_scale) {
  TS_CHECK(slot.n <= staging.capacity, "offload: parameter '", slot.state->name, "' has ", slot.n,
           " elements to update, over the staging's ", staging.capacity);
  const size_t bytes = static_cast<size_t>(slot.n) * sizeof(float);
  float* value = staging.value ? staging.value : slot.param;
  if (staging.value) backend.copy_to_host(value, slot.param, bytes);
  backend.copy_to_host(staging.grad, slot.grad, bytes);
  ParamEntry& e = *slot.state;
  kernels::adamw_update(value, staging.grad, e.m.device_f32(), e.v.device_f32(), slot.n, lr,
                        static_cast<float>(c.beta1), static_cast<float>(c.beta2),
                        static_cast<float>(c.eps), wd, step, grad_scale);
  if (staging.value) backend.copy_from_host(slot.param, value, bytes);
}

}  // namespace

UpdateStats apply_update(const TrainConfig& c, Backend& backend,
                         const std::vector<UpdateSlot>& slots, int64_t step,
                         const GlobalSumOfSquares& global_sum, int64_t updates, double lr_override,
                         const OffloadStaging& staging) {
  const bool offloaded = offloads(c, "optimizer");  // offloaded_adamw checks the staging
  UpdateStats stats;
  std::vector<double> local_sq(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    local_sq[i] = backend.sum_of_squares(slots[i].grad, slots[i].n);
  stats.grad_norm = std::sqrt(global_sum(local_sq));
  if (!std::isfinite(stats.grad_norm))
    TS_THROW("step ", step, ": gradient norm is ", stats.grad_norm,
             " (the loss diverged; lower 'lr' or enable 'grad_clip')");
  float grad_scale = 1.0f;
  if (c.grad_clip > 0 && stats.grad_norm > c.grad_clip)
    grad_scale = static_cast<float>(c.grad_clip / stats.grad_norm);
  stats.lr = lr_override > 0 ? lr_override : learning_rate(c, step);
  const float lr = static_cast<float>(stats.lr);
  for (const UpdateSlot& slot : slots) {
    ParamEntry& e = *slot.state;
    const float wd = weight_decay_of(c, e);
    if (c.optimizer == "sgd") {
      backend.sgd_update(slot.param, slot.grad, slot.n, lr, wd, grad_scale);
      continue;
    }
    if (const int64_t moments = std::max(slot.n, slot.moments); e.m.numel() != moments) {
      e.m = DeviceTensor(backend, Shape{{"state", moments}}, moment_space(c));
      e.v = DeviceTensor(backend, Shape{{"state", moments}}, moment_space(c));
    }
    const int64_t t = updates > 0 ? updates : step + 1;
    if (offloaded) {
      offloaded_adamw(backend, slot, staging, lr, c, wd, t, grad_scale);
      continue;
    }
    backend.adamw_update(slot.param, slot.grad, e.m.device_f32(), e.v.device_f32(), slot.n, lr,
                         static_cast<float>(c.beta1), static_cast<float>(c.beta2),
                         static_cast<float>(c.eps), wd, t, grad_scale);
  }
  return stats;
}

}  // namespace tessel
