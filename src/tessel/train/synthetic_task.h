// The training task of data "synthetic": token ids drawn uniformly from
// [0, vocab), for timing any vocabulary (`tessel bench step`, the planner's
// validation) without a tokenizer or a token file. Nothing can be learned
// from them: the baseline is log(vocab), the loss of a uniform prediction,
// and no model beats it.
//
// Row r of batch s is a pure function of (seed, split, s, r): the same on
// every run and on any number of ranks. Targets are the row's next tokens
// (the row draws context + 1 ids), as in real text data.
#pragma once

#include <memory>

#include "tessel/train/task.h"

namespace tessel {

std::unique_ptr<Task> make_synthetic_task(const TrainConfig& config);

}  // namespace tessel
