// Which weights an asynchronous pipeline's micro-batches run on.
//
// In PipeDream-style schedules a stage updates its weights after a
// micro-batch's backward while later micro-batches are still in flight, so
// the weights change between a micro-batch's forward and its backward:
//   kStash (PipeDream, PipeDream-2BW): a forward runs on a copy of the
//     current weights and its backward on the same copy. Copies are shared
//     by every micro-batch that started on the same version and reused once
//     none holds them; PipeDream keeps one per in-flight micro-batch, 2BW
//     (updating every p micro-batches) never more than two.
//   kPredict (XPipe): a forward runs on weights predicted for the moment its
//     backward will run, s updates ahead: w - lr * s * (AdamW's step
//     direction from the current moments); the backward runs on the current
//     weights. Nothing is stashed; the prediction is scratch.
// The master copy is the ParamStore the optimizer updates; the stashed and
// predicted copies are device memory too, filled by the backend's copy and
// (kPredict) by host code inside the pipeline step's access scope: a GPU
// backend needs that prediction as a kernel. Program instances are re-bound to
// the right copy before each forward and backward.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessel/backend/backend.h"
#include "tessel/compile/config.h"
#include "tessel/runtime/program.h"
#include "tessel/train/param_store.h"

namespace tessel {

class WeightVersions {
 public:
  enum class Mode { kStash, kPredict };
  // `copies`: stash buffers to allocate (the most distinct versions the
  // schedule's in-flight micro-batches can hold); `staleness[i]`: updates on
  // this rank between micro-batch i's forward and its backward.
  WeightVersions(Mode mode, ParamStore& master, int copies, const TrainConfig& config,
                 std::vector<int> staleness);

  void before_forward(int microbatch, Program& program);
  void before_backward(int microbatch, Program& program);
  void released(int microbatch);
  // The optimizer just updated the master weights (`updates` so far, for
  // the moments' bias correction).
  void on_update(int64_t updates, double lr);

  // The most distinct weight versions held at once (master included).
  int peak_versions() const { return peak_versions_; }
  int64_t bytes() const;

 private:
  struct Copy {
    DeviceMemory data;
    std::optional<int64_t> version;  // none until it first holds a copy
    int users = 0;
  };
  void bind(Program& program, uint8_t* base);
  void count_versions();

  Mode mode_;
  ParamStore& master_;
  TrainConfig config_;
  std::vector<int> staleness_;
  std::map<std::string, size_t> offset_;  // byte offset of each parameter in a copy
  size_t total_bytes_ = 0;
  std::vector<Copy> copies_;
  std::map<int, int> copy_of_;  // micro-batch -> copy index
  int64_t version_ = 0;         // updates applied to the master
  double lr_ = 0;
  int peak_versions_ = 1;
};

}  // namespace tessel
