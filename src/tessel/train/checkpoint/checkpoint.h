// Training checkpoints: a directory other tools can read.
//
//   model.safetensors      parameters, named as the model names them
//   optimizer.safetensors  AdamW moments ("<name>.m", "<name>.v"), if any
//   manifest.json          format version, step, the full config, and each
//                          parameter's named dims
//
// Saving writes a sibling temporary directory and renames it into place, so
// an interrupted save never leaves a half-written checkpoint under the final
// name. Loading checks every tensor's presence, dtype and shape against the
// model before touching any parameter.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tessel/train/config.h"
#include "tessel/train/param_store.h"

namespace tessel {

void save_checkpoint(const std::string& dir, const TrainConfig& config, const ParamStore& params,
                     int64_t step);

struct CheckpointInfo {
  TrainConfig config;
  int64_t step = 0;
};

// Reads manifest.json only.
CheckpointInfo read_checkpoint_info(const std::string& dir);

// Loads parameters (and optimizer moments when present) into `params`.
void load_checkpoint(const std::string& dir, ParamStore& params);

}  // namespace tessel
