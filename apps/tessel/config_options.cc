#include "config_options.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/plan/published_run.h"
#include "tessel/train/threads.h"

namespace tessel::cli {

CLI::Validator at_least(long long least) {
  auto check = [least](std::string& value) -> std::string {
    long long n = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (error == std::errc() && end == value.data() + value.size() && n >= least) return "";
    return "must be a whole number of at least " + std::to_string(least) + ", got " + value;
  };
  return CLI::Validator(check, ">= " + std::to_string(least));
}

void ConfigOptions::add_to(CLI::App* command, bool with_steps) {
  command->add_option("--config", path, "training config (JSON)")->required();
  command->add_option("--set", overrides, "override a config key: --set lr=3e-4 (repeatable)");
  if (with_steps)
    command->add_option("--steps", steps, "number of training steps")->check(at_least(1));
  command
      ->add_option("--threads", threads,
                   "intra-op threads per rank (default: the host's cores / the ranks on it)")
      ->check(at_least(0));
  command->add_option("--device", device,
                      "where the program runs: cpu (default) | cuda (never run on a GPU yet: "
                      "refused unless TESSEL_UNVERIFIED_CUDA=1, docs/gpu.md)");
  command->add_option("--mesh", mesh, "device mesh, e.g. data=2,model=2 (launch with mpirun)");
  command->add_option(
      "--layout", layout,
      "dims to mesh axes, e.g. batch=data,heads=model,seq=model (default by axis name)");
  command
      ->add_option("--zero", zero,
                   "ZeRO stage over the data axis: 0, 1 or 2 (optimizer state, gradients "
                   "sharded), 3 (and parameters, gathered on use)")
      ->check(at_least(0));
  command->add_option("--offload", offload,
                      "none, or a comma list of: optimizer (AdamW's moments in pinned host "
                      "memory, the update on the CPU cores), weights (with optimizer: the f32 "
                      "weights there too), activations (what the backward reads, held in pinned "
                      "host memory between forward and backward)");
  command->add_option("--recompute", recompute,
                      "activations recomputed in backward: none | selective (attention core, norm "
                      "and MLP activation outputs) | "
                      "blocks | blocks:K (segments of K blocks) | blocks:K:J (the first J "
                      "blocks), +selective | auto (fewest recomputed FLOPs within --memory-limit; "
                      "may fuse the loss)");
  command->add_option(
      "--memory-limit", memory_limit,
      "per-rank memory budget, e.g. 2GiB: fail before compute if the plan exceeds it");
  command
      ->add_option("--microbatches", microbatches,
                   "split each batch into this many micro-batches (pipelines, accumulation)")
      ->check(at_least(1));
  command->add_option("--schedule", schedule,
                      "pipeline schedule: gpipe | 1f1b | interleaved | zb-h1");
  command->add_option("--chunks", chunks, "model chunks per pipeline rank (interleaved)")
      ->check(at_least(1));
  command
      ->add_option("--stages", stages,
                   "block each pipeline stage after the first starts at, e.g. 2,4 "
                   "(default: balanced by predicted time)")
      ->delimiter(',');
  command->add_option("--trace", trace, "write a Chrome trace (JSON) of every action here");
  command->add_option("--shard", shard,
                      "override one value's placement: LABEL:dim=axis,... (LABEL: replicates it)");
}

namespace {

// Whether the config file or a --set names `key` (not just its default).
bool sets_key(const std::string& path, const std::vector<std::string>& overrides,
              const std::string& key) {
  for (const std::string& o : overrides)
    if (o.rfind(key + "=", 0) == 0) return true;
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains(key);
}

// warmup_steps at or beyond steps makes every step warm-up (the learning rate
// never reaches 'lr' nor decays): an error when the config (file and --set)
// asks for it. --steps alone on the command line is a short run of that
// config (a smoke test, a run resumed later), so it only gets a note
// (note_short_warmup); so does the default warm-up (20) in a config of that
// few steps.
void check_warmup(const TrainConfig& config, bool warmup_set) {
  if (warmup_set && config.warmup_steps >= config.steps)
    TS_THROW("config: 'warmup_steps' (", config.warmup_steps, ") must be below 'steps' (",
             config.steps,
             "): every step would be warm-up, and the learning rate would never reach 'lr' nor "
             "decay to 'min_lr'; lower warmup_steps (0: none) or raise steps");
}

void note_short_warmup(const TrainConfig& config, bool warmup_set, int64_t steps_flag) {
  if (config.warmup_steps < config.steps) return;
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank != nullptr && std::string(rank) != "0") return;
  std::fprintf(stderr,
               "note: %s%lld ends within the warm-up (warmup_steps %lld%s): the learning rate "
               "rises toward 'lr' on every step\n",
               steps_flag >= 0 ? "--steps " : "steps ", static_cast<long long>(config.steps),
               static_cast<long long>(config.warmup_steps), warmup_set ? "" : ", the default");
}

}  // namespace

TrainConfig ConfigOptions::load(bool with_data) const {
  TrainConfig c = allow_published ? TrainConfig::from_json(plan::read_config_file(path).keys)
                                  : TrainConfig::from_file(path);
  for (const std::string& o : overrides) c.set(o);
  const bool warmup_set = sets_key(path, overrides, "warmup_steps");
  check_warmup(c, warmup_set);  // as the config (file and --set) says
  if (steps >= 0) c.set("steps=" + std::to_string(steps));
  note_short_warmup(c, warmup_set, steps);
  if (threads >= 0) c.set("threads=" + std::to_string(threads));
  if (zero >= 0) c.set("zero=" + std::to_string(zero));
  if (!recompute.empty()) c.recompute = recompute;
  if (!memory_limit.empty()) c.memory_limit = memory_limit;
  if (!device.empty()) c.set("device=" + device);
  if (!offload.empty()) c.set("offload=" + offload);
  if (!mesh.empty()) c.mesh = mesh;
  if (!layout.empty()) c.layout = layout;
  if (microbatches > 0) c.microbatches = microbatches;
  if (!schedule.empty()) c.schedule = schedule;
  if (chunks > 0) c.chunks = chunks;
  if (!stages.empty()) c.stages = stages;
  if (!trace.empty()) c.trace = trace;
  for (const std::string& s : shard) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos || colon == 0)
      TS_THROW("--shard '", s,
               "' must look like LABEL:dim=axis,... (e.g. block0.mlp.act:seq=model)");
    c.shard[s.substr(0, colon)] = s.substr(colon + 1);
  }
  c.validate(with_data);
  apply_threads(c.threads);  // 'threads', else this rank's share of the host's cores
  return c;
}

}  // namespace tessel::cli
