#include "tessel/train/checkpoint/run_state.h"

#include "tessel/train/optimizer.h"

namespace tessel {

nlohmann::json describe_run_state(const TrainConfig& config, const std::string& mesh,
                                  const std::string& layout, int ranks, int64_t step) {
  nlohmann::json lr = {{"schedule", "linear warmup then " + config.lr_schedule},
                       {"position", step},
                       {"warmup_steps", config.warmup_steps},
                       {"total_steps", config.steps},
                       {"next_lr", learning_rate(config, step)}};
  const bool asynchronous =
      config.schedule == "pipedream" || config.schedule == "2bw" || config.schedule == "xpipe";
  return {{"next_step", step},
          {"lr_schedule", lr},
          {"rng",
           {{"seed", config.seed},
            {"stateless", true},
            {"note",
             "every random stream (initialisation, batches, dropout) is Philox keyed by the seed "
             "and the step, row or element: seed and next_step restore them all"}}},
          {"data_position",
           {{"next_step", step},
            {"rows_per_step", config.batch},
            {"note", "batch s is a pure function of (seed, s, row)"}}},
          {"optimizer",
           {{"name", config.optimizer},
            {"note", asynchronous ? "AdamW's update count per rank is next_step times the "
                                    "schedule's updates per step on that rank"
                                  : "AdamW's bias correction uses next_step + 1 next"}}},
          {"weight_versions",
           asynchronous ? "none: the asynchronous schedule drains at every step boundary, so no "
                          "stashed version is live when a checkpoint is taken"
                        : "none: synchronous schedule"},
          {"saved_on",
           {{"ranks", ranks},
            {"mesh", mesh},
            {"layout", layout},
            {"zero", config.zero},
            {"schedule", config.schedule},
            {"microbatches", config.microbatches},
            {"chunks", config.chunks},
            {"recompute", config.recompute},
            {"precision", "f32"}}}};
}

}  // namespace tessel
