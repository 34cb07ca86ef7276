// `tessel bench step`: times training steps after warm-up and prints one JSON
// line with the median step time, throughput, achieved GFLOP/s and, on the
// CPU, the machine's measured FMA peak (the bf16 peak for precision bf16),
// so the fraction of peak is visible (on a GPU there is no probe of its
// peak: the GPU check takes the datasheet's, docs/gpu.md). Any config
// `train` takes, pipelines included (their JSON has no comm_fraction).
// --breakdown adds where the step goes, kind of instruction by kind,
// measured on the timed steps (step_breakdown.h; one program only, so not
// for pipelines): a table before the JSON line and a "breakdown" object in
// the JSON.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "config_options.h"
#include "step_breakdown.h"
#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/runtime/machine_peak.h"
#include "tessel/train/trainer.h"

namespace tessel::cli {
namespace {

struct BenchOptions {
  ConfigOptions config;
  int64_t steps = 10, warmup = 3;
  bool breakdown = false;
};

// This CPU's peak and the run's fraction of it, for `gflops` over the job:
// a rank's peak is its threads at one core's rate each, or the threads'
// probe where that measured more (on a shared host the threads' probe alone
// can lose a vCPU for its whole 0.2 s and read low: docs/precision.md, "Peak
// and fraction of peak"); the job's, every rank's threads at the rate the
// root measured alone (an upper bound where ranks share cores). A bf16 run
// is measured against the bf16 peak (its GEMMs' units).
nlohmann::json cpu_peak(bool bf16, int threads, int ranks, double gflops) {
  auto peak = [bf16](int t) {
    return bf16 ? measure_bf16_peak_gflops(t) : measure_fma_peak_gflops(t);
  };
  const double peak1 = peak(1);
  const double peak_rank = std::max(peak(threads), threads * peak1);
  const double peak_job = peak_rank * ranks;
  return {{"peak_gflops_1core", peak1},
          {"peak_gflops_per_rank", peak_rank},
          {"peak_gflops", peak_job},
          {"peak_isa", bf16 ? bf16_probe_isa() : fma_probe_isa()},
          {"fraction_of_peak", gflops / peak_job}};
}

int run_bench_step(const BenchOptions& opt) {
  TrainConfig config = opt.config.load();
  config.steps = std::max<int64_t>(config.steps, opt.steps + opt.warmup);
  config.eval_every = 0;
  Trainer trainer(config);
  const int threads = omp_get_max_threads();
  std::vector<double> ms;
  // Time in collectives, where one program runs the step (a pipeline's
  // stages also wait on each other, which no program counts).
  Program* program = trainer.pipeline() ? nullptr : &trainer.train_program();
  std::unique_ptr<StepBreakdown> breakdown;
  if (opt.breakdown && !program)
    TS_THROW(
        "bench step --breakdown times one training program, and this run is pipelined or "
        "micro-batched (mesh ",
        trainer.distributed().mesh().to_string(), ", microbatches ", config.microbatches,
        "): each stage and micro-batch runs a program of its own");
  if (opt.breakdown) breakdown = std::make_unique<StepBreakdown>(*program);
  double comm_seconds = 0;
  for (int64_t i = 0; i < opt.warmup + opt.steps; ++i) {
    if (i == opt.warmup && program) comm_seconds = -program->collective_seconds();
    const bool timed = i >= opt.warmup;
    if (timed && breakdown) breakdown->begin_step();
    auto t0 = std::chrono::steady_clock::now();
    trainer.step();
    trainer.backend().synchronize();  // a GPU's queued kernels (the update) count in their step
    const double t = seconds_since(t0) * 1e3;
    if (timed && breakdown) breakdown->end_step();
    if (timed) ms.push_back(t);
  }
  if (program) comm_seconds += program->collective_seconds();
  double total_ms = 0;
  for (double t : ms) total_ms += t;
  std::sort(ms.begin(), ms.end());
  double median = ms[ms.size() / 2];
  if (ms.size() % 2 == 0) median = 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]);
  double gflops = trainer.flops_per_step() / (median / 1e3) / 1e9;
  // Under mpirun only the root probes the peak, once the other ranks are done
  // (their steps end together: every step synchronises on collectives).
  if (!trainer.is_root()) return 0;
  const int ranks = trainer.distributed().mesh().rank_count();
  nlohmann::json out = {
      {"model", config.model},
      {"device", config.device},
      {"threads", threads},
      {"batch", config.batch},
      {"parameters", trainer.parameter_count()},  // the whole model, every shard
      {"steps_timed", opt.steps},
      {"ms_per_step_median", median},
      {"ms_per_step_min", ms.front()},
      {std::string(trainer.task().item_name()) + "_per_s",
       trainer.items_per_step() / (median / 1e3)},
      {"gflop_per_step", trainer.flops_per_step() / 1e9},
      {"gflops", gflops},
      {"precision", config.precision},
      {"onednn_isa", kernels::onednn_cpu_isa()},
      {"arena_mib", trainer.arena_bytes() / 1048576.0},
      {"mesh", trainer.distributed().mesh().to_string()},
      {"ranks", ranks},
      {std::string(trainer.task().item_name()) + "_per_s_per_rank",
       trainer.items_per_step() / (median / 1e3) / ranks},
  };
  if (config.device == "cpu")
    out.update(cpu_peak(config.precision == "bf16", threads, ranks, gflops));
  if (program) out["comm_fraction"] = comm_seconds * 1e3 / total_ms;
  if (breakdown) {
    out["breakdown"] = breakdown->to_json();
    // On stdout before the JSON line: one stream keeps the order (under
    // mpirun, stderr and stdout are forwarded apart and can interleave).
    std::printf("%s", breakdown->table().c_str());
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  CLI::App* step = bench->add_subcommand("step", "time training steps of a config");
  opt->config.add_to(step, /*with_steps=*/false);
  step->add_option("--steps", opt->steps, "timed steps")->check(at_least(1));
  step->add_option("--warmup", opt->warmup, "untimed warm-up steps");
  step->add_flag("--breakdown", opt->breakdown,
                 "also time the training program instruction by instruction: where a step goes, "
                 "by kind (not for pipelines)");
  return {bench, [opt] { return run_bench_step(*opt); }};
}

}  // namespace tessel::cli
