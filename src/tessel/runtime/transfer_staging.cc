#include "tessel/runtime/transfer_staging.h"

#include <algorithm>

#include "tessel/base/error.h"

namespace tessel {
namespace {

int64_t numel(const PipelineStage& s, ValueId v) {
  return s.instances.front()->graph().node(v).shape.numel();
}

// Per stage: the offsets of its sent values in one mirror, and the mirror's
// floats (the last entry).
std::vector<int64_t> send_offsets(const PipelineStage& s) {
  std::vector<int64_t> at = {0};
  for (const auto* values : {&s.activations_out, &s.gradients_out})
    for (ValueId v : *values) at.push_back(at.back() + numel(s, v));
  return at;
}

int64_t largest_received(const std::vector<PipelineStage>& stages) {
  int64_t n = 0;
  for (const PipelineStage& s : stages)
    for (const auto* values : {&s.activations_in, &s.gradients_in})
      for (ValueId v : *values) n = std::max(n, numel(s, v));
  return n;
}

std::vector<int> instance_counts(const std::vector<PipelineStage>& stages) {
  std::vector<int> out;
  for (const PipelineStage& s : stages) out.push_back(static_cast<int>(s.instances.size()));
  return out;
}

}  // namespace

int64_t TransferStaging::bytes(const std::vector<PipelineStage>& stages,
                               const std::vector<int>& instances) {
  TS_CHECK(instances.size() == stages.size(), "transfer staging: ", instances.size(),
           " instance counts for ", stages.size(), " stages");
  int64_t floats = largest_received(stages);
  for (size_t k = 0; k < stages.size(); ++k)
    floats += instances[k] * send_offsets(stages[k]).back();
  return floats * static_cast<int64_t>(sizeof(float));
}

TransferStaging::TransferStaging(Backend& backend, const std::vector<PipelineStage>& stages)
    : backend_(backend), instances_(instance_counts(stages)) {
  int64_t at = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    offset_.push_back(send_offsets(stages[k]));
    first_.push_back(at);
    at += instances_[k] * offset_.back().back();
  }
  receive_at_ = at;
  receive_floats_ = largest_received(stages);
  memory_ =
      backend.allocate(MemorySpace::kPinnedHost, static_cast<size_t>(bytes(stages, instances_)));
}

float* TransferStaging::send_mirror(size_t stage, size_t instance, size_t value, int64_t n) const {
  TS_CHECK(stage < offset_.size() && instance < static_cast<size_t>(instances_[stage]) &&
               value + 1 < offset_[stage].size() &&
               n <= offset_[stage][value + 1] - offset_[stage][value],
           "transfer staging: stage ", stage, " instance ", instance, " value ", value, " of ", n,
           " floats has no mirror that holds it");
  float* base = reinterpret_cast<float*>(memory_.data());
  return base + first_[stage] + instance * offset_[stage].back() + offset_[stage][value];
}

float* TransferStaging::receive_buffer(int64_t n) const {
  TS_CHECK(n <= receive_floats_, "transfer staging: a receive of ", n,
           " floats is larger than the largest planned, ", receive_floats_);
  return reinterpret_cast<float*>(memory_.data()) + receive_at_;
}

}  // namespace tessel
