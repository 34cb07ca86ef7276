// Training checkpoints: a directory other tools can read.
//
//   model.safetensors      parameters, named as the model names them
//   optimizer.safetensors  AdamW moments ("<name>.m", "<name>.v"), if any
//   tied_copies.safetensors  asynchronous pipelines only: the copies of a tied
//                          parameter held by its later pipeline stages
//                          ("<name>@pipe<coord>" and its moments), which
//                          drift from the first stage's (each stage clips its
//                          own gradient); only the same pipeline reads them
//   manifest.json          format version, step, the full config, each
//                          parameter's named dims, and "state": the rest of
//                          the run's state (checkpoint/run_state.h) for exact
//                          resume
//   tokenizer.model        runs with a 'tokenizer' only: a copy of it, its hash
//                          in the manifest (checkpoint/checkpoint_tokenizer.h)
//
// Saving writes a sibling temporary directory and renames it into place, so
// an interrupted save never leaves a half-written checkpoint under the final
// name. Tensors are produced one at a time as they are written, so a sharded
// run needs one full tensor's buffer, not a full copy of the model. Loading checks every tensor's
// presence, dtype and shape against the model before touching any parameter.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessel/comm/communicator.h"
#include "tessel/compile/config.h"
#include "tessel/tensor/aligned_buffer.h"
#include "tessel/train/param_store.h"

namespace tessel {

// The full tensors of a checkpoint, produced one at a time: `full(i, part)`
// returns parameter i's full values (or its AdamW moment m or v), valid until
// the next call. On a mesh it gathers, so it is collective: every rank calls
// it for the same tensors in the same order.
struct CheckpointSource {
  enum class Part { kValue, kM, kV };
  struct Param {
    std::string name;
    Shape shape;
    bool has_moments = false;
    bool tied_copy = false;  // goes to tied_copies.safetensors, not model/optimizer
  };
  std::vector<Param> params;
  std::function<const float*(size_t param, Part part)> full;
  // Optional, for snapshots in one collective instead of one per tensor:
  // `place` writes this rank's share of a tensor into a zeroed buffer of the
  // full tensor (no communication; the rank that does not write a block
  // leaves zeros), and `sum` adds such buffers over every rank in place
  // (collective), which assembles every tensor exactly (x + 0 == x).
  // Only tensors `sharded` says are split over ranks are summed; the others
  // are placed by the keeping rank alone, which must be their writer (rank 0).
  std::function<void(size_t param, Part part, float* zeroed_full)> place;
  // Starts the sum (non-blocking); the request completes it.
  std::function<std::unique_ptr<CommRequest>(float* data, int64_t n)> sum;
  std::function<bool(size_t param, Part part)> sharded;
  nlohmann::json state = nlohmann::json::object();  // written as the manifest's "state"
};

// The full tensors of a source copied into one host buffer, in the writer's
// order (collective like `source.full`). Only where `keep` is true are the
// bytes kept (the writing rank); the others just join the gathers. A source
// with `place`, `sum` and `sharded` is taken in one collective over the
// sharded tensors, which every rank then holds (counted on every rank by the
// memory prediction; the keeping rank holds every tensor). The buffer is reused by the next
// snapshot of the same model.
class CheckpointSnapshot {
 public:
  void take(const CheckpointSource& source, bool keep);
  // Allocates (and touches) the buffer take() will fill, ahead of the first
  // take, which then only copies. No collectives.
  void reserve(const CheckpointSource& source, bool keep);
  // A batched take starts its world sum without waiting for it (it
  // progresses inside the next step's MPI calls): every rank calls finish()
  // before the copy is read (source()) or taken again. A no-op otherwise.
  void finish();
  bool pending() const { return !requests_.empty(); }
  // A source that reads the copies (no collectives): safe on another thread.
  CheckpointSource source() const;
  int64_t bytes() const;

 private:
  // The writer's order, whether the take is batched, and the floats summed
  // (the sharded region) and held.
  struct Layout {
    std::vector<std::pair<size_t, CheckpointSource::Part>> order;
    bool batched = false;
    int64_t summed = 0, held = 0;
  };
  // Sets shape_ and at_ for `source` and sizes all_ to what it holds.
  Layout lay_out(const CheckpointSource& source, bool keep);

  CheckpointSource shape_;      // names, shapes, state; no `full`
  AlignedBuffer all_;           // every tensor, in the writer's order
  std::vector<int64_t> at_[3];  // per Part: float offsets into all_ (-1: none)
  std::vector<std::unique_ptr<CommRequest>> requests_;  // the sum in flight
};

// Bytes a snapshot of these tensors keeps: values, plus both moments when present.
int64_t snapshot_bytes(const std::vector<CheckpointSource::Param>& params);

// Every rank of a mesh calls this (it drives `source.full` in one fixed
// order); only where `write` is true are files written.
void save_checkpoint(const std::string& dir, const TrainConfig& config,
                     const CheckpointSource& source, int64_t step, bool write = true);

// The parameters of one process, written straight from their storage.
void save_checkpoint(const std::string& dir, const TrainConfig& config, const ParamStore& params,
                     int64_t step);

struct CheckpointInfo {
  TrainConfig config;
  int64_t step = 0;
  nlohmann::json state;  // the manifest's "state" (empty for older checkpoints)
};

// Reads manifest.json only.
CheckpointInfo read_checkpoint_info(const std::string& dir);

// Loads parameters (and, with `with_optimizer`, the optimizer moments when
// the file is present) into `params`. Everything is checked before anything
// is copied: a missing or extra tensor (e.g. a manifest whose n_layer
// disagrees with the file), a wrong dtype or shape, or a NaN/Inf value is an
// error naming the file and tensor, and leaves `params` untouched.
// `sample` and `eval` pass with_optimizer = false and never open
// optimizer.safetensors.
void load_checkpoint(const std::string& dir, ParamStore& params, bool with_optimizer = true);

}  // namespace tessel
