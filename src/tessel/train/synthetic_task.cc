#include "tessel/train/synthetic_task.h"

#include <cmath>
#include <cstdint>

#include "tessel/base/philox.h"

namespace tessel {
namespace {

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

std::unique_ptr<Task> make_synthetic_task(const TrainConfig& config) {
  return std::make_unique<SyntheticTask>(config);
}

}  // namespace tessel
