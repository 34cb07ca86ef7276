// Unknown config keys: the error suggests the nearest key, or the key a
// common alias from other frameworks means (learning_rate -> lr, warmup ->
// warmup_steps), and never points a learning-rate schedule at the pipeline's
// 'schedule'.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "common/error_of.h"
#include "tessel/compile/config.h"

namespace tessel {
namespace {

std::string key_error(const std::string& key) {
  return error_of([&] { TrainConfig::from_json(nlohmann::json{{key, 1}}); });
}

TEST(ConfigKeys, NearNamesAndAliasesGetSuggestions) {
  EXPECT_NE(key_error("n_layers").find("(did you mean 'n_layer'?)"), std::string::npos);
  for (const auto& [alias, key] :
       std::vector<std::pair<std::string, std::string>>{{"learning_rate", "lr"},
                                                        {"warmup", "warmup_steps"},
                                                        {"lr_warmup_steps", "warmup_steps"},
                                                        {"max_steps", "steps"},
                                                        {"batch_size", "batch"},
                                                        {"min_learning_rate", "min_lr"},
                                                        {"max_grad_norm", "grad_clip"}}) {
    const std::string e = key_error(alias);
    EXPECT_NE(e.find("unknown key '" + alias + "' (did you mean '" + key + "'?)"),
              std::string::npos)
        << e;
  }
  TrainConfig c;
  EXPECT_NE(error_of([&] { c.set("warmup=3"); }).find("did you mean 'warmup_steps'"),
            std::string::npos);
}

TEST(ConfigKeys, ALearningRateScheduleIsNotPointedAtThePipelineSchedule) {
  for (const std::string key : {"lr_scheduler", "scheduler", "lr_decay"}) {
    const std::string e = key_error(key);
    EXPECT_EQ(e.find("did you mean 'schedule'"), std::string::npos) << e;
    EXPECT_NE(e.find("did you mean 'lr_schedule'"), std::string::npos) << e;
  }
  TrainConfig c;
  c.set("lr_schedule=wsd");
  EXPECT_EQ(c.lr_schedule, "wsd");
  c.lr_schedule = "step";
  EXPECT_NE(error_of([&] { c.validate(false); }).find("'lr_schedule' must be cosine, linear"),
            std::string::npos);
  c.lr_schedule = "wsd";
  c.decay_fraction = 0;
  EXPECT_NE(error_of([&] { c.validate(false); }).find("'decay_fraction' must be in (0, 1]"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel
