// The part of a run's state a checkpoint needs beyond its tensors, for exact
// resume: written as manifest.json's "state".
//
// Everything here is a function of the config and the step: batches are a
// pure function of (seed, step, row), parameter initialisation and dropout
// masks of the seed (and labels, elements, step), and the learning rate of
// the step. So the step and the seed restore every random stream and the
// data position; the entries record that, and the layout the checkpoint was
// saved on (any layout can load it: tensors are stored whole). Asynchronous
// pipeline schedules drain at every trainer step, so at a step boundary no
// micro-batch holds a stashed weight version: there is none to store.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tessel/compile/config.h"

namespace tessel {

// `mesh` and `layout`: as resolved on the saving run; `ranks`: its world size.
nlohmann::json describe_run_state(const TrainConfig& config, const std::string& mesh,
                                  const std::string& layout, int ranks, int64_t step);

}  // namespace tessel
