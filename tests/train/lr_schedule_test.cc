// The learning-rate schedules (train/optimizer.h learning_rate) at their
// corner steps, and which parameters get weight decay (weight_decay_of).
#include <gtest/gtest.h>

#include <cmath>

#include "tessel/train/optimizer.h"

namespace tessel {
namespace {

TrainConfig schedule(const std::string& name) {
  TrainConfig c;
  c.lr_schedule = name;
  c.lr = 1.0;
  c.min_lr = 0.1;
  c.warmup_steps = 10;
  c.steps = 110;
  c.decay_fraction = 0.2;
  return c;
}

TEST(LrSchedule, EveryScheduleWarmsUpLinearlyThenFollowsItsShape) {
  for (const char* name : {"cosine", "linear", "constant", "wsd"}) {
    const TrainConfig c = schedule(name);
    EXPECT_DOUBLE_EQ(learning_rate(c, 0), 0.1) << name;  // (0 + 1) / 10
    EXPECT_DOUBLE_EQ(learning_rate(c, 9), 1.0) << name;
  }
  const TrainConfig cosine = schedule("cosine"), linear = schedule("linear");
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 10), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 60), 0.1 + 0.45 * (1 + std::cos(M_PI * 0.5)));
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(linear, 60), 0.55);  // halfway from 1 to 0.1
  EXPECT_DOUBLE_EQ(learning_rate(linear, 110), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(schedule("constant"), 109), 1.0);
  // wsd: stable at lr until the last 20% (22 of 110 steps), then linear to min_lr.
  const TrainConfig wsd = schedule("wsd");
  EXPECT_DOUBLE_EQ(learning_rate(wsd, 87), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(wsd, 88), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(wsd, 99), 1.0 - 0.9 * 11.0 / 22.0);
  EXPECT_DOUBLE_EQ(learning_rate(wsd, 110), 0.1);
}

TEST(LrSchedule, WeightDecaySkipsRankOneParametersUnlessAsked) {
  TrainConfig c;
  c.weight_decay = 0.1;
  ParamEntry matrix{"w", DeviceTensor(cpu_backend(), Shape{{"a", 2}, {"b", 2}}), {}, {}, true};
  ParamEntry gain{"ln.gamma", DeviceTensor(cpu_backend(), Shape{{"a", 2}}), {}, {}, false};
  EXPECT_FLOAT_EQ(weight_decay_of(c, matrix), 0.1f);
  EXPECT_FLOAT_EQ(weight_decay_of(c, gain), 0.0f);
  c.decay_norms_and_biases = true;
  EXPECT_FLOAT_EQ(weight_decay_of(c, gain), 0.1f);
}

}  // namespace
}  // namespace tessel
