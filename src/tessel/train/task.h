// A training task: the data set that feeds a model, by the model's DataKind
// (compile/model_registry.h: text for "gpt", images for "mlp", what a user's
// model registered).
//
// The trainer is model-agnostic: build_model() builds the config's model for a
// given batch, and a Task fills a compiled program's inputs with the batch for (split,
// step), drawn deterministically from the seed — the same batch on every run
// and, later, each rank's shard computable on its own.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tessel/compile/config.h"
#include "tessel/compile/model_registry.h"
#include "tessel/ir/builder.h"
#include "tessel/runtime/program.h"

namespace tessel {

enum class Split { kTrain, kVal };

struct EvalResult {
  double loss = 0;                 // mean over evaluated batches
  std::optional<double> accuracy;  // classification tasks only
};

class Task {
 public:
  virtual ~Task() = default;
  // Writes the inputs of batch `index` of `split` (full, unsharded), each
  // into the buffer `input(name)` returns.
  using InputBuffers = std::function<void*(const std::string& name)>;
  virtual void fill_batch(const InputBuffers& input, Split split, int64_t index,
                          int64_t batch) const = 0;
  // Items (tokens or examples) per batch row.
  virtual int64_t items_per_row() const = 0;
  virtual const char* item_name() const = 0;
  // A loss any real learning must beat: the unigram entropy of the text, or
  // log(classes) for a classifier at chance.
  virtual double baseline_loss() const = 0;
  // What baseline_loss is, for printouts and summary.json.
  virtual const char* baseline_name() const = 0;
  // Classifiers: accuracy of full logits against the batch's labels.
  virtual bool has_accuracy() const { return false; }
  virtual double accuracy(const float* logits, const InputBuffers& input, int64_t batch) const {
    return -1;
  }
  // Data read in a global sample order (data "tokens", task.cc):
  // the training samples consumed before `step`, recorded in checkpoints;
  // nullopt where a batch is a pure function of the step alone.
  virtual std::optional<int64_t> consumed_samples(int64_t step) const { return std::nullopt; }
  // A resumed run: `consumed` samples were consumed before `step`.
  virtual void resume_at(int64_t step, int64_t consumed) {}
  // Which samples training batch `step` holds, for the metrics (null: not recorded).
  virtual nlohmann::json train_batch_info(int64_t step) const { return nullptr; }
};

// Loads the dataset the config names; throws (naming the package) if missing.
std::unique_ptr<Task> make_task(const TrainConfig& config);

}  // namespace tessel
