#include "tessel/train/task.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/train/data/fashion_mnist.h"
#include "tessel/train/data/text_corpus.h"
#include "tessel/train/data/token_dataset.h"

namespace tessel {
namespace {

// Evaluation batches are drawn from a stream of their own, so evaluating
// never shifts which training batches a run sees.
constexpr uint64_t kEvalSeedSalt = 0x5eed0fe7a1ull;
constexpr int64_t kImagePixels = 28 * 28;  // what DataKind::kImages promises a model

class TextTask : public Task {
 public:
  explicit TextTask(const TrainConfig& c)
      : corpus_(c.data_dir.empty() ? TextCorpus::load_fortunes()
                                   : TextCorpus::load_fortunes(c.data_dir)),
        seed_(c.seed) {
    context_ = c.context;
    if (static_cast<int64_t>(corpus_.val.size()) <= c.context)
      TS_THROW("data: the validation text (", corpus_.val.size(),
               " bytes) is shorter than 'context' (", c.context, ")");
    baseline_ = unigram_entropy_nats(corpus_.train);
  }

  void fill_batch(const InputBuffers& input, Split split, int64_t index,
                  int64_t batch) const override {
    const auto& data = split == Split::kTrain ? corpus_.train : corpus_.val;
    uint64_t seed = split == Split::kTrain ? seed_ : seed_ ^ kEvalSeedSalt;
    sample_text_batch(data, seed, index, 0, batch, context_, static_cast<int32_t*>(input("tokens")),
                      static_cast<int32_t*>(input("targets")));
  }

  int64_t items_per_row() const override { return context_; }
  const char* item_name() const override { return "tokens"; }
  double baseline_loss() const override { return baseline_; }
  const char* baseline_name() const override { return "unigram entropy of the training text"; }

 private:
  TextCorpus corpus_;
  int64_t context_;
  uint64_t seed_;
  double baseline_ = 0;
};

class ImageTask : public Task {
 public:
  explicit ImageTask(const TrainConfig& c)
      : train_(c.data_dir.empty() ? load_fashion_mnist("train")
                                  : load_fashion_mnist("train", c.data_dir)),
        test_(c.data_dir.empty() ? load_fashion_mnist("test")
                                 : load_fashion_mnist("test", c.data_dir)),
        seed_(c.seed) {
    if (train_.rows * train_.cols != kImagePixels)
      TS_THROW("data: Fashion-MNIST images are ", train_.rows, "x", train_.cols, ", expected ",
               kImagePixels, " pixels");
  }

  void fill_batch(const InputBuffers& input, Split split, int64_t index,
                  int64_t batch) const override {
    const ImageDataset& d = split == Split::kTrain ? train_ : test_;
    uint64_t seed = split == Split::kTrain ? seed_ : seed_ ^ kEvalSeedSalt;
    sample_image_batch(d, seed, index, 0, batch, static_cast<float*>(input("images")),
                       static_cast<int32_t*>(input("labels")));
  }

  int64_t items_per_row() const override { return 1; }
  const char* item_name() const override { return "samples"; }
  double baseline_loss() const override {
    return std::log(static_cast<double>(kFashionMnistClasses));
  }
  const char* baseline_name() const override { return "chance"; }

  bool has_accuracy() const override { return true; }
  double accuracy(const float* l, const InputBuffers& input, int64_t rows) const override {
    const int32_t* labels = static_cast<const int32_t*>(input("labels"));
    const int64_t classes = kFashionMnistClasses;
    int64_t correct = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = l + r * classes;
      correct += std::max_element(row, row + classes) - row == labels[r];  // the first of equals
    }
    return static_cast<double>(correct) / rows;
  }

 private:
  ImageDataset train_, test_;
  uint64_t seed_;
};

// Data "synthetic": token ids drawn uniformly from [0, vocab), for timing
// any vocabulary (`tessel bench step`, the planner's validation) without a
// tokenizer or a token file. Nothing can be learned from them: the baseline
// is log(vocab), the loss of a uniform prediction, and no model beats it.
// Row r of batch s is a pure function of (seed, split, s, r): the same on
// every run and on any number of ranks. Targets are the row's next tokens
// (the row draws context + 1 ids), as in real text data.
class SyntheticTask : public Task {
 public:
  explicit SyntheticTask(const TrainConfig& c)
      : train_(c.seed, "synthetic_train"),
        val_(c.seed, "synthetic_val"),
        context_(c.context),
        vocab_(c.vocab) {}

  void fill_batch(const InputBuffers& input, Split split, int64_t index,
                  int64_t batch) const override {
    const PhiloxStream& stream = split == Split::kTrain ? train_ : val_;
    auto* tokens = static_cast<int32_t*>(input("tokens"));
    auto* targets = static_cast<int32_t*>(input("targets"));
    const uint64_t row_ids = static_cast<uint64_t>(context_ + 1);
    for (int64_t r = 0; r < batch; ++r) {
      // element i of row r of batch `index`: one counter per id
      const uint64_t first = (static_cast<uint64_t>(index) * batch + r) * row_ids;
      for (int64_t i = 0; i <= context_; ++i) {
        const auto id = static_cast<int32_t>(stream.below(vocab_, first + i));
        if (i < context_) tokens[r * context_ + i] = id;
        if (i > 0) targets[r * context_ + i - 1] = id;
      }
    }
  }

  int64_t items_per_row() const override { return context_; }
  const char* item_name() const override { return "tokens"; }
  double baseline_loss() const override { return std::log(static_cast<double>(vocab_)); }
  const char* baseline_name() const override {
    return "log(vocab): uniform random tokens, nothing to learn";
  }

 private:
  PhiloxStream train_, val_;
  int64_t context_;
  uint64_t vocab_;
};

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

// Data "tokens": a token file (train/data/token_file.h) read through
// TokenDataset's seeded global sample order. Training batch s holds global
// samples [c + (s - s0) * batch, ... + batch), where a fresh run starts at
// s0 = 0, c = 0 and a resumed one at the checkpoint's step and consumed
// samples: each global batch is the next `batch` samples of the order, split
// over the data-parallel ranks by the usual batch sharding, so the samples
// and their order never depend on the number of ranks. Validation batch i
// holds validation windows [i * batch, (i + 1) * batch) modulo their number,
// in order. The constructor opens and validates the config's token file (and
// its tokenizer's hash), throwing naming the file before any compute.
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

std::unique_ptr<Task> make_task(const TrainConfig& config) {
  // The model's data kind (model_registry.h); the graph's inputs were
  // checked against it when the model was built.
  if (model_data_kind(config) == DataKind::kText) {
    if (config.data == "tokens") return std::make_unique<TokenTask>(config);
    if (config.data == "synthetic") return std::make_unique<SyntheticTask>(config);
    return std::make_unique<TextTask>(config);
  }
  return std::make_unique<ImageTask>(config);
}

}  // namespace tessel
