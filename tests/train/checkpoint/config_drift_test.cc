// config_drift (train/checkpoint/config_drift.h): the keys a resumed run
// changes of its checkpoint's config, without the execution keys.
#include "tessel/train/checkpoint/config_drift.h"

#include <gtest/gtest.h>

namespace tessel {
namespace {

TEST(ConfigDrift, ListsTheTrainingKeysThatChangedAndNotTheExecutionOnes) {
  TrainConfig saved;
  saved.lr = 3e-4;
  TrainConfig resumed = saved;
  resumed.mesh = "data=2,model=2", resumed.zero = 1, resumed.threads = 3;
  resumed.recompute = "selective", resumed.checkpoint_every = 7;
  EXPECT_TRUE(config_drift(saved, resumed).empty()) << "only how the run executes changed";
  resumed.lr = 1e-3, resumed.steps = saved.steps * 2, resumed.seed = saved.seed + 1;
  EXPECT_EQ(
      config_drift(saved, resumed),
      (std::vector<std::string>{"lr 0.0003 -> 0.001", "seed 1234 -> 1235", "steps 200 -> 400"}));
}

}  // namespace
}  // namespace tessel
