#include "tessel/train/task.h"

#include <cmath>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/train/data/fashion_mnist.h"
#include "tessel/train/data/text_corpus.h"
#include "tessel/train/token_task.h"

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
      int64_t best = 0;
      for (int64_t c = 1; c < classes; ++c)
        if (l[r * classes + c] > l[r * classes + best]) best = c;
      correct += best == labels[r];
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

}  // namespace

std::unique_ptr<Task> make_task(const TrainConfig& config) {
  // The model's data kind (model_registry.h); the graph's inputs were
  // checked against it when the model was built.
  if (model_data_kind(config) == DataKind::kText) {
    if (config.data == "tokens") return make_token_task(config);
    if (config.data == "synthetic") return std::make_unique<SyntheticTask>(config);
    return std::make_unique<TextTask>(config);
  }
  return std::make_unique<ImageTask>(config);
}

}  // namespace tessel
