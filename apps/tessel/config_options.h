// Options shared by commands that read a training config: --config, --set,
// --steps, --threads, --mesh, --layout. Overrides apply on top of the file, key by key.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tessel/compile/config.h"

namespace tessel::cli {

struct ConfigOptions {
  std::string path;
  std::vector<std::string> overrides;
  int64_t steps = -1;
  int threads = -1;
  std::string device;
  std::string offload;
  int zero = -1;
  std::string recompute;
  std::string memory_limit;
  int64_t microbatches = 0, chunks = 0;
  std::string schedule, trace;
  std::vector<int64_t> stages;
  std::string mesh, layout;
  std::vector<std::string> shard;
  // Read the file without its `published` block (plan/published_run.h):
  // only `tessel plan` sets this; other commands refuse the block.
  bool allow_published = false;

  void add_to(CLI::App* command, bool with_steps = true);
  // The file, then --set, then --steps/--threads; validated (without the
  // data-set checks unless `with_data`: plans of models no data set fits).
  TrainConfig load(bool with_data = true) const;
};

// A check for a whole-number flag (any command's): at least `least`, else
// an error naming the flag, the bound and the value.
CLI::Validator at_least(long long least);

}  // namespace tessel::cli
