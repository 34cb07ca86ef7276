// The `tessel` subcommands. Each registers its options on a CLI11 app and
// returns the function that runs it (exit code). Errors propagate as
// tessel::Error and are printed by main with a non-zero exit.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "tessel/compile/config.h"
#include "tessel/plan/search/search.h"

namespace tessel {
struct CompiledRank;
}

namespace tessel::cli {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_train_command(CLI::App& app);
// `tessel train --dry-run` (dry_run.cc): every rank's predicted memory.
int run_dry(TrainConfig config);
Command add_sample_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_report_command(CLI::App& app);
Command add_launch_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_calibrate_command(CLI::App& app);
Command add_config_command(CLI::App& app);
// `export` / `import --format hf` (hf_command.cc).
Command add_export_command(CLI::App& app);
Command add_import_command(CLI::App& app);
Command add_tokenize_command(CLI::App& app);
struct ConfigOptions;
// The planner's request from a command line: the knobs given are fixed.
plan::PlanRequest plan_request(const ConfigOptions& options, const TrainConfig& base, int ranks);
// `train --plan auto`: the config with the top plan's mesh, layout, schedule,
// chunks, micro-batches, ZeRO stage, recompute policy and threads for
// `ranks` ranks, from this machine's cached profile (every rank reads the
// same one, so every rank makes the same choice).
TrainConfig apply_auto_plan(const ConfigOptions& options, TrainConfig config, int ranks,
                            bool announce);
// `inspect` of a pipelined config: the stage partition and each rank's share.
int inspect_pipeline(const CompiledRank& compiled);

}  // namespace tessel::cli
