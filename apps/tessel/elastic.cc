#include "elastic.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <filesystem>

#include "command_args.h"
#include "commands.h"
#include "config_options.h"
#include "tessel/base/error.h"
#include "tessel/plan/calibrate/calibrate.h"
#include "tessel/plan/search/search.h"

namespace tessel::cli {
namespace {

// Options that fix a layout knob; an elastic relaunch lets the planner choose them.
const std::vector<std::string> kLayoutKnobs = {
    "--mesh",      "--layout",       "--schedule", "--chunks", "--zero",
    "--recompute", "--microbatches", "--stages",   "--shard",  "--plan"};

// The config options of `train ARGS...`, parsed as `train` parses them (the
// train-only options are ignored here).
ConfigOptions config_options_of(const std::vector<std::string>& command) {
  CLI::App app;
  app.allow_extras();
  ConfigOptions options;
  options.add_to(&app);
  std::vector<std::string> args(command.begin() + 1, command.end());
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  app.parse(args);
  return options;
}

}  // namespace

LostRanks take_lost_ranks(const std::string& lost_dir, int world) {
  LostRanks lost;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(lost_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0) continue;
    const std::string number = name.substr(5);
    int rank = -1;
    const auto [end, err] = std::from_chars(number.data(), number.data() + number.size(), rank);
    if (err == std::errc() && end == number.data() + number.size() && rank >= 0 && rank < world)
      lost.ranks.push_back(rank);
    else
      lost.ignored.push_back(name);
    std::filesystem::remove(entry.path(), ec);
  }
  std::sort(lost.ranks.begin(), lost.ranks.end());
  lost.ranks.erase(std::unique(lost.ranks.begin(), lost.ranks.end()), lost.ranks.end());
  std::sort(lost.ignored.begin(), lost.ignored.end());
  return lost;
}

std::optional<ElasticRelaunch> plan_elastic_relaunch(const std::vector<std::string>& command,
                                                     int alive, int min_ranks, std::string* why) {
  std::vector<std::string> args = command;
  for (const std::string& knob : kLayoutKnobs) args = without_option(args, knob);
  const ConfigOptions options = config_options_of(args);
  const TrainConfig base = options.load(/*with_data=*/false);
  for (int n = alive; n >= std::max(1, min_ranks); --n) {
    try {
      const TrainConfig chosen = apply_auto_plan(options, base, n, /*announce=*/false);
      args.insert(args.end(), {"--plan", "auto"});
      return ElasticRelaunch{n, args, plan::plan_flags(chosen)};
    } catch (const Error& e) {
      *why = "no plan for " + std::to_string(n) + " ranks: " + e.what();
    }
  }
  return std::nullopt;
}

void check_elastic_ready(int ranks, int min_ranks) {
  if (min_ranks < 1 || min_ranks > ranks)
    TS_THROW("launch: --elastic ", min_ranks, " must be between 1 and -n (", ranks, ")");
  const std::string cached = plan::default_profile_path();
  if (ranks - 1 > 1 && !std::filesystem::exists(cached))
    TS_THROW("launch --elastic: a relaunch on ", ranks - 1,
             " ranks plans its layout (`train --plan auto`), which needs this machine's profile, "
             "and none is cached at ",
             cached, ": run `tessel calibrate` once first");
}

}  // namespace tessel::cli
