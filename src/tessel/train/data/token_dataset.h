// A token file cut into training and validation samples (docs/data.md).
//
// Documents are split, not tokens: with a seeded SampleOrder over the
// documents, those at the first round(documents * val_fraction) positions
// (at least 1, at most documents - 1) are the validation split, the rest the
// training split. Each split is its documents concatenated in file order, and
// sample k of a split is the window of context + 1 tokens starting at token
// k * context of it (consecutive samples share one token: the last target of
// one is the first input of the next). Training samples are read in a seeded
// global order: global sample g is window order.at(g / n, g % n) of the n
// training windows (epoch g / n), a pure function of (seed, g), so the order
// never depends on the number of ranks and resumes from the number of samples
// consumed. Validation samples are read in order.
#pragma once

#include <cstdint>
#include <vector>

#include "tessel/train/data/sample_order.h"
#include "tessel/train/data/token_file.h"

namespace tessel {

// Some documents of a token file, concatenated.
class TokenStream {
 public:
  TokenStream(const TokenFile& file, std::vector<int64_t> documents);
  int64_t size() const { return starts_.back(); }
  int64_t documents() const { return static_cast<int64_t>(documents_.size()); }
  // Tokens [begin, begin + count) of the concatenation.
  void copy(int64_t begin, int64_t count, int32_t* out) const;

 private:
  const TokenFile* file_;
  std::vector<int64_t> documents_;
  std::vector<int64_t> starts_;  // where each document starts in the stream; then the size
};

class TokenDataset {
 public:
  // Throws naming the file if a split has no window of context + 1 tokens.
  TokenDataset(TokenFile file, int64_t context, double val_fraction, uint64_t seed);
  TokenDataset(const TokenDataset&) = delete;  // the streams point into file_
  TokenDataset& operator=(const TokenDataset&) = delete;

  const TokenFile& file() const { return file_; }
  int64_t context() const { return context_; }
  int64_t train_samples() const { return samples(train_); }
  int64_t val_samples() const { return samples(val_); }
  const TokenStream& train() const { return train_; }
  const TokenStream& val() const { return val_; }
  // The training window of global sample g (>= 0).
  int64_t train_window(int64_t global_sample) const;
  // Writes window `window` of `split`: context tokens and the next context
  // tokens as targets.
  void fill(const TokenStream& split, int64_t window, int32_t* tokens, int32_t* targets) const;

 private:
  int64_t samples(const TokenStream& s) const { return (s.size() - 1) / context_; }
  static TokenStream split(const TokenFile& file, double val_fraction, uint64_t seed, bool val);
  TokenFile file_;
  int64_t context_;
  TokenStream train_, val_;
  SampleOrder order_;
};

}  // namespace tessel
