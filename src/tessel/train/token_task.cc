#include "tessel/train/token_task.h"

#include <cmath>
#include <cstdio>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/train/data/token_dataset.h"

namespace tessel {
namespace {

// The file's vocabulary and tokenizer against the config's.
void check_against_config(const TokenFile& f, const TrainConfig& c) {
  if (f.vocab() != c.vocab)
    TS_THROW("token file '", f.path(), "' has a vocabulary of ", f.vocab(), "; config 'vocab' is ",
             c.vocab, " (they must be equal)");
  if (c.tokenizer.empty()) {
    if (f.tokenizer_hash() != 0)
      TS_THROW("token file '", f.path(),
               "' was cut by a tokenizer model; set 'tokenizer' to that model file so that "
               "checkpoints can decode (byte-level files have none)");
    return;
  }
  const uint64_t hash = tokenizer_file_hash(c.tokenizer);
  if (f.tokenizer_hash() != hash)
    TS_THROW("tokenizer '", c.tokenizer, "' does not match token file '", f.path(), "' (",
             f.tokenizer_hash() == 0 ? std::string("which holds byte-level tokens")
                                     : "which another tokenizer model cut",
             ")");
}

// Entropy of the token histogram of `s`, in nats.
double unigram_entropy(const TokenStream& s, int64_t vocab) {
  std::vector<int64_t> counts(vocab, 0);
  std::vector<int32_t> chunk;
  for (int64_t at = 0; at < s.size(); at += 1 << 16) {
    chunk.resize(std::min<int64_t>(1 << 16, s.size() - at));
    s.copy(at, static_cast<int64_t>(chunk.size()), chunk.data());
    for (int32_t t : chunk) ++counts[t];
  }
  double entropy = 0;
  for (int64_t n : counts)
    if (n > 0) {
      const double p = static_cast<double>(n) / static_cast<double>(s.size());
      entropy -= p * std::log(p);
    }
  return entropy;
}

class TokenTask : public Task {
 public:
  explicit TokenTask(const TrainConfig& c) : batch_(c.batch) {
    TokenFile file = TokenFile::open(c.token_file);
    check_against_config(file, c);
    data_ = std::make_unique<TokenDataset>(std::move(file), c.context, c.val_fraction, c.seed);
    baseline_ = unigram_entropy(data_->train(), c.vocab);
  }

  void fill_batch(const InputBuffers& input, Split split, int64_t index,
                  int64_t batch) const override {
    auto* tokens = static_cast<int32_t*>(input("tokens"));
    auto* targets = static_cast<int32_t*>(input("targets"));
    const int64_t context = data_->context();
    for (int64_t r = 0; r < batch; ++r) {
      const int64_t window = split == Split::kTrain ? data_->train_window(first_sample(index) + r)
                                                    : (index * batch + r) % data_->val_samples();
      data_->fill(split == Split::kTrain ? data_->train() : data_->val(), window,
                  tokens + r * context, targets + r * context);
    }
  }

  int64_t items_per_row() const override { return data_->context(); }
  const char* item_name() const override { return "tokens"; }
  double baseline_loss() const override { return baseline_; }
  const char* baseline_name() const override { return "unigram entropy of the training tokens"; }

  std::optional<int64_t> consumed_samples(int64_t step) const override {
    return first_sample(step);
  }
  void resume_at(int64_t step, int64_t consumed) override {
    if (consumed < 0) TS_THROW("resume: consumed samples must be >= 0, got ", consumed);
    start_step_ = step;
    start_consumed_ = consumed;
  }
  nlohmann::json train_batch_info(int64_t step) const override {
    // FNV-1a over the windows in batch order: equal digests, equal samples.
    std::string windows;
    for (int64_t r = 0; r < batch_; ++r) {
      const int64_t w = data_->train_window(first_sample(step) + r);
      windows.append(reinterpret_cast<const char*>(&w), sizeof w);
    }
    char digest[17];
    std::snprintf(digest, sizeof digest, "%016llx",
                  static_cast<unsigned long long>(hash_name(windows)));
    return {{"first_sample", first_sample(step)}, {"windows_digest", digest}};
  }

 private:
  int64_t first_sample(int64_t step) const {
    const int64_t first = start_consumed_ + (step - start_step_) * batch_;
    if (first < 0)
      TS_THROW("token data: step ", step, " is before the resumed run's first step ", start_step_);
    return first;
  }

  std::unique_ptr<TokenDataset> data_;
  int64_t batch_;
  int64_t start_step_ = 0, start_consumed_ = 0;
  double baseline_ = 0;
};

}  // namespace

std::unique_ptr<Task> make_token_task(const TrainConfig& config) {
  return std::make_unique<TokenTask>(config);
}

}  // namespace tessel
