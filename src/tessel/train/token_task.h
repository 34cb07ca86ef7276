// The training task of data "tokens": a token file (train/data/token_file.h)
// read through TokenDataset's seeded global sample order.
//
// Training batch s holds global samples [c + (s - s0) * batch, ... + batch),
// where a fresh run starts at s0 = 0, c = 0 and a resumed one at the
// checkpoint's step and consumed samples: each global batch is the next
// `batch` samples of the order, split over the data-parallel ranks by the
// usual batch sharding, so the samples and their order never depend on the
// number of ranks. Validation batch i holds validation windows
// [i * batch, (i + 1) * batch) modulo their number, in order.
#pragma once

#include <memory>

#include "tessel/train/task.h"

namespace tessel {

// Opens and validates the config's token file (and its tokenizer's hash);
// throws naming the file before any compute.
std::unique_ptr<Task> make_token_task(const TrainConfig& config);

}  // namespace tessel
