// Training checkpoints: a directory other tools can read.
//
//   model.safetensors      parameters, named as the model names them
//   optimizer.safetensors  AdamW moments ("<name>.m", "<name>.v"), if any
//   manifest.json          format version, step, the full config, and each
//                          parameter's named dims
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

#include "tessel/compile/config.h"
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
  };
  std::vector<Param> params;
  std::function<const float*(size_t param, Part part)> full;
};

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
