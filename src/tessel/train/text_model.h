// A trained text model loaded from a checkpoint, for sampling and evaluation.
//
// Any registered model trained on the text (data "fortunes": the GPT, or one
// registered from Python) whose inputs are tokens/targets (batch, seq) and
// whose logits are (batch, seq, vocab), causal over seq.
// Rebuilds the model from the checkpoint's config (forward only, no dropout),
// loads the parameters, and compiles two programs: one row for sampling and
// `batch` rows for scoring text. Sampling is deterministic given the seed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessel/runtime/program.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/param_store.h"

namespace tessel {

class TextModel {
 public:
  explicit TextModel(const std::string& checkpoint_dir);

  // Continues `prompt` by `chars` bytes (temperature 0: greedy).
  std::string sample(const std::string& prompt, int64_t chars, float temperature, uint64_t seed);

  struct Score {
    double nats_per_byte = 0;
    double bits_per_byte = 0;
    int64_t bytes_scored = 0;
  };
  // Mean next-byte loss over non-overlapping context windows of `text`.
  Score score(const std::vector<uint8_t>& text);

  const TrainConfig& config() const { return info_.config; }
  int64_t step() const { return info_.step; }

 private:
  struct Compiled {
    std::unique_ptr<Program> program;
    ValueId logits, loss;
  };
  Compiled compile(int64_t batch);

  CheckpointInfo info_;
  std::unique_ptr<ParamStore> params_;
  Compiled one_row_;
};

}  // namespace tessel
