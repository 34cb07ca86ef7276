#include "tessel/train/weight_versions.h"

#include <cmath>
#include <cstring>
#include <set>

#include "tessel/base/error.h"
#include "tessel/train/optimizer.h"

namespace tessel {

WeightVersions::WeightVersions(Mode mode, ParamStore& master, int copies, const TrainConfig& config,
                               std::vector<int> staleness)
    : mode_(mode), master_(master), config_(config), staleness_(std::move(staleness)) {
  for (const ParamEntry& e : master_.entries()) {
    offset_[e.name] = total_bytes_;
    total_bytes_ += (e.value.nbytes() + 63) / 64 * 64;
  }
  copies_.resize(mode_ == Mode::kPredict ? 1 : copies);
  for (Copy& c : copies_)
    c.data = master_.backend().allocate(MemorySpace::kDevice, std::max<size_t>(total_bytes_, 64));
}

int64_t WeightVersions::bytes() const {
  return static_cast<int64_t>(copies_.size() * total_bytes_);
}

void WeightVersions::bind(Program& program, uint8_t* base) {
  for (ValueId id : program.graph().params()) {
    const std::string& name = program.graph().node(id).name;
    float* storage = base ? reinterpret_cast<float*>(base + offset_.at(name))
                          : master_.at(name).value.device_f32();
    program.bind_param(name, storage);
  }
}

void WeightVersions::count_versions() {
  std::set<int64_t> held = {version_};
  for (const Copy& c : copies_)
    if (c.users > 0) held.insert(c.version.value());  // a used copy holds a version
  peak_versions_ = std::max(peak_versions_, static_cast<int>(held.size()));
}

void WeightVersions::before_forward(int microbatch, Program& program) {
  if (mode_ == Mode::kPredict) {
    // The weights s updates from now, extrapolated along AdamW's current step.
    uint8_t* base = copies_[0].data.data();
    const int s = staleness_.at(microbatch);
    const float b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
    const float c1 = 1.0f - std::pow(b1, static_cast<float>(version_));
    const float c2 = 1.0f - std::pow(b2, static_cast<float>(version_));
    const float step = static_cast<float>(lr_ * s);
    for (const ParamEntry& e : master_.entries()) {
      float* out = reinterpret_cast<float*>(base + offset_.at(e.name));
      // Host code on the master's device memory, inside the pipeline step's
      // access scope (docs/gpu.md, "What is not done").
      const float* w = e.value.device_f32();
      const int64_t n = e.value.numel();
      if (s == 0 || version_ == 0 || e.m.numel() != n) {
        std::memcpy(out, w, n * sizeof(float));
        continue;
      }
      const float wd = weight_decay_of(config_, e);
      const float eps = static_cast<float>(config_.eps);
      const float* m = e.m.device_f32();
      const float* v = e.v.device_f32();
      for (int64_t i = 0; i < n; ++i)
        out[i] = w[i] - step * ((m[i] / c1) / (std::sqrt(v[i] / c2) + eps) + wd * w[i]);
    }
    bind(program, base);
    return;
  }
  // Stash: share a copy of the current version, or fill a free one.
  int chosen = -1;
  for (size_t i = 0; i < copies_.size() && chosen < 0; ++i)
    if (copies_[i].version == version_) chosen = static_cast<int>(i);
  if (chosen < 0) {
    for (size_t i = 0; i < copies_.size() && chosen < 0; ++i)
      if (copies_[i].users == 0) chosen = static_cast<int>(i);
    if (chosen < 0)
      TS_THROW("weight stashing: micro-batch ", microbatch, " needs a copy of weight version ",
               version_, " but all ", copies_.size(),
               " copies hold versions of micro-batches in flight");
    for (const ParamEntry& e : master_.entries())  // the master's current weights
      master_.backend().copy(copies_[chosen].data.data() + offset_.at(e.name), e.value.device_f32(),
                             e.value.nbytes());
    copies_[chosen].version = version_;
  }
  ++copies_[chosen].users;
  copy_of_[microbatch] = chosen;
  bind(program, copies_[chosen].data.data());
  count_versions();
}

void WeightVersions::before_backward(int microbatch, Program& program) {
  if (mode_ == Mode::kPredict) bind(program, nullptr);  // backward on the current weights
}

void WeightVersions::released(int microbatch) {
  if (mode_ == Mode::kPredict) return;
  auto it = copy_of_.find(microbatch);
  TS_CHECK(it != copy_of_.end(), "weight stashing: micro-batch ", microbatch, " holds no copy");
  --copies_[it->second].users;
  copy_of_.erase(it);
}

void WeightVersions::on_update(int64_t updates, double lr) {
  version_ = updates;
  lr_ = lr;
  if (mode_ == Mode::kStash) count_versions();
}

}  // namespace tessel
