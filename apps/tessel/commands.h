// The `tessel` subcommands. Each registers its options on a CLI11 app and
// returns the function that runs it (exit code). Errors propagate as
// tessel::Error and are printed by main with a non-zero exit.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "tessel/train/config.h"

namespace tessel::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_train_command(CLI::App& app);
Command add_sample_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_report_command(CLI::App& app);
// `inspect` of a pipelined config: the stage partition and each rank's share.
int inspect_pipeline(const TrainConfig& config, int rank);

}  // namespace tessel::cli
