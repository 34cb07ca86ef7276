// Which configs may run on `device: cuda` (docs/gpu.md, "The unverified
// CUDA path"). The CUDA backend has never run on a GPU, so a CUDA run is
// refused unless the environment sets TESSEL_UNVERIFIED_CUDA=1 (the
// prepared GPU check does), and even then only for what the backend has
// kernels and host code for: one rank, f32, no pipeline or gradient
// accumulation, no offload, and a model whose ops all have CUDA kernels
// (the GPT or MLP, with `attention: unfused` and `loss: unfused`).
// Checked from the config alone, before any data is read or memory
// allocated; a config on the CPU always passes.
#pragma once

#include <string>

#include "tessel/compile/config.h"

namespace tessel {

// "" when `config` may run on its device; else why not, naming the key.
// `unverified_allowed`: TESSEL_UNVERIFIED_CUDA=1 is set.
std::string cuda_refusal(const TrainConfig& config, bool unverified_allowed);

// Throws cuda_refusal's reason for the environment's setting.
void refuse_unrunnable_device(const TrainConfig& config);

}  // namespace tessel
