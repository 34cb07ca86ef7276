// Size limits of a training config, checked with overflow-safe arithmetic
// before anything is built or allocated (TrainConfig::validate calls it).
//
// Every size key must fit in an int (kernels and MPI counts index with int);
// the products that become tensors (parameters, activations, attention
// scores, logits) must fit in 2^40 elements each and in total parameters;
// n_layer is capped so that the graph stays quick to build. Each error names
// the keys involved and their values.
#pragma once

#include "tessel/compile/config.h"

namespace tessel {

// `runs`: the config will train (tensors allocated: the 2^40 limits); else
// it is only planned or dry-run offline (products must not overflow).
void check_config_sizes(const TrainConfig& config, bool runs = true);

}  // namespace tessel
