// A trained text model loaded from a checkpoint, for sampling and evaluation.
//
// Any registered model trained on text (data "fortunes" or "tokens": the GPT,
// the Llama, or one registered from Python) whose inputs are tokens/targets
// (batch, seq) and whose logits are (batch, seq, vocab), causal over seq.
// Text is cut by the checkpoint's own tokenizer (its tokenizer.model, hash
// checked: checkpoint/checkpoint_tokenizer.h), or into bytes without one.
// Rebuilds the model from the checkpoint's config (forward only, no dropout),
// loads the parameters, and compiles two programs: one row for sampling and
// `batch` rows for scoring text. Sampling is deterministic given the seed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessel/runtime/program.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/data/tokenizer.h"
#include "tessel/train/param_store.h"

namespace tessel {

class TextModel {
 public:
  explicit TextModel(const std::string& checkpoint_dir);

  // Continues `prompt` by `count` tokens (bytes for byte-level models;
  // temperature 0: greedy), decoded.
  std::string sample(const std::string& prompt, int64_t count, float temperature, uint64_t seed);

  struct Score {
    double nats_per_token = 0;
    double nats_per_byte = 0;  // comparable across tokenizers
    double bits_per_byte = 0;
    int64_t tokens_scored = 0;
    int64_t bytes_scored = 0;  // the bytes of the scored tokens' text
  };
  // Mean next-token loss over non-overlapping context windows of `text`'s
  // tokens; per byte: the summed loss over the bytes those tokens decode to.
  Score score(const std::vector<uint8_t>& text);
  // The validation split of a token file (TokenDataset with the
  // checkpoint's seed and val_fraction: what its run held out), whose
  // tokenizer must be the checkpoint's; throws naming the file otherwise.
  Score score_token_file(const std::string& path);
  const Tokenizer& tokenizer() const { return tokenizer_; }

  const TrainConfig& config() const { return info_.config; }
  int64_t step() const { return info_.step; }

 private:
  struct Compiled {
    std::unique_ptr<Program> program;
    ValueId logits, loss;
  };
  Compiled compile(int64_t batch);
  Score score_tokens(const std::vector<int32_t>& ids);

  CheckpointInfo info_;
  Tokenizer tokenizer_;
  std::unique_ptr<ParamStore> params_;
  Compiled one_row_;
};

}  // namespace tessel
