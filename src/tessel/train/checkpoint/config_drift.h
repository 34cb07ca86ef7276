// What a resumed run changes of the config its checkpoint was saved with.
//
// Resuming restores the weights, the optimizer and the data order exactly,
// but the run then follows its own config: a learning rate, step count or
// seed that differs from the checkpoint's silently changes the trajectory.
// The keys that only say how and where a run executes (mesh, layout, ZeRO,
// schedule, recomputation, threads, checkpointing, ...) may change freely on
// resume and are not listed; every other key that differs is, in the
// order of `tessel config --list`.
#pragma once

#include <string>
#include <vector>

#include "tessel/compile/config.h"

namespace tessel {

// "key old -> new" for each key that defines the training and differs.
std::vector<std::string> config_drift(const TrainConfig& saved, const TrainConfig& resumed);

}  // namespace tessel
