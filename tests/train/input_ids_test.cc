// Ids enter on the host: a token or label outside what the op reading it
// takes (an embedding's rows, a loss's classes) is refused by the trainer
// before any compute, naming the input, the element and the op, with one
// program and with micro-batches (the pipeline engine). The refused step
// changes nothing: the weights and the step count stay, and the next good
// step runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/train/trainer.h"

namespace tessel {
namespace {

// Fills every staged input with id 1, and element 5 of `name` with `id`.
Trainer::BatchFiller one_bad_id(const std::string& name, int32_t id) {
  return [=](const std::string& input, Tensor& staged) {
    int32_t* ids = static_cast<int32_t*>(staged.raw());
    std::fill_n(ids, staged.numel(), 1);
    if (input == name) ids[5] = id;
  };
}

std::vector<std::vector<float>> weights(Trainer& t) {
  std::vector<std::vector<float>> out;
  for (const ParamEntry& e : t.params().entries()) out.push_back(e.value.to_host());
  return out;
}

TEST(InputIds, OutOfRangeIdsAreRefusedBeforeAnyCompute) {
  for (int64_t microbatches : {1, 2}) {
    SCOPED_TRACE(microbatches);
    TrainConfig c = tiny_gpt_config(2, 8);
    c.threads = 1;
    c.eval_batches = 1;
    c.microbatches = microbatches;
    Trainer t(c);
    t.step(one_bad_id("tokens", 0));
    const std::vector<std::vector<float>> before = weights(t);
    const std::string vocab = std::to_string(c.vocab);
    EXPECT_NE(error_of([&] { t.step(one_bad_id("tokens", static_cast<int32_t>(c.vocab))); })
                  .find("input 'tokens': id " + vocab + " at element 5 is outside [0, " + vocab +
                        "), what embedding"),
              std::string::npos);
    const std::string label = error_of([&] { t.step(one_bad_id("targets", -1)); });
    EXPECT_NE(label.find("input 'targets': id -1 at element 5"), std::string::npos) << label;
    EXPECT_NE(label.find("cross_entropy"), std::string::npos) << label;
    EXPECT_EQ(t.steps_done(), 1);
    EXPECT_EQ(weights(t), before);
    EXPECT_NO_THROW(t.step(one_bad_id("tokens", static_cast<int32_t>(c.vocab) - 1)));
    EXPECT_EQ(t.steps_done(), 2);
  }
}

}  // namespace
}  // namespace tessel
