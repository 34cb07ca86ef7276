// TransferStaging: the pinned host buffers through which a pipeline's
// transfers travel when its communicator reaches host memory only
// (collectives: staged, docs/gpu.md).
//
// A send stays in flight until its micro-batch's instance is reused or
// its backward begins (PipelineExecutor), so every (stage, instance) has its
// own mirror of the values it sends: its activations, then its gradients.
// A receive completes before the next one starts, so one buffer of the
// largest received value serves them all. Sized once from the stages'
// programs (bytes(), which the memory plan counts too); nothing is
// allocated per step.
#pragma once

#include <cstdint>
#include <vector>

#include "tessel/backend/backend.h"
#include "tessel/runtime/pipeline_executor.h"

namespace tessel {

class TransferStaging {
 public:
  // `stages` as the executor runs them, each with its instances.
  TransferStaging(Backend& backend, const std::vector<PipelineStage>& stages);
  // Pinned bytes for `stages` with `instances[k]` micro-batches in flight on stage k.
  static int64_t bytes(const std::vector<PipelineStage>& stages, const std::vector<int>& instances);

  Backend& backend() const { return backend_; }
  // The mirror of send number `value` (activations_out, then gradients_out)
  // of `instance` of stage `stage` (its index in the executor's stages);
  // checks that `n` floats fit.
  float* send_mirror(size_t stage, size_t instance, size_t value, int64_t n) const;
  float* receive_buffer(int64_t n) const;

 private:
  Backend& backend_;
  DeviceMemory memory_;  // pinned host
  // Per stage: each sent value's offset in a mirror (the last: a mirror's
  // floats), and where its first mirror starts.
  std::vector<std::vector<int64_t>> offset_;
  std::vector<int64_t> first_;
  std::vector<int> instances_;
  int64_t receive_at_ = 0, receive_floats_ = 0;
};

}  // namespace tessel
