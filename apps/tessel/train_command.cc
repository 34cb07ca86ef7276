// `tessel train`: the training loop with progress, metrics, evaluation,
// checkpoint and (for text models) a sample at the end.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "config_options.h"
#include "periodic_saver.h"
#include "progress.h"
#include "run_directory.h"
#include "standby.h"
#include "stop_signal.h"
#include "tessel/backend/backend.h"
#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/model_registry.h"
#include "tessel/compile/recompute_choice.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/tensor/aligned_buffer.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/checkpoint_dirs.h"
#include "tessel/train/checkpoint/config_drift.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/text_model.h"
#include "tessel/train/trainer.h"
#include "train_summary.h"

namespace tessel::cli {
namespace {

struct TrainOptions {
  ConfigOptions config;
  std::string out = "runs/latest";
  bool comm_stats = false;
  bool dry_run = false;
  std::string plan;  // "auto": the planner's top plan for the ranks launched
  bool overwrite = false;
  std::string resume;  // a checkpoint directory, or "auto"
  int64_t checkpoint_every = -1, keep = -1;
  bool sync_save = false;
  std::string standby;  // `tessel launch --standby`: wait for this go file (standby.h)
};

// The periodic-save flags are config keys (the memory prediction counts the
// asynchronous save's host copy), set here on top of the file and --set.
TrainConfig load_config(const TrainOptions& opt) {
  TrainConfig config = opt.config.load(/*with_data=*/!opt.dry_run);
  if (opt.checkpoint_every >= 0)
    config.set("checkpoint_every=" + std::to_string(opt.checkpoint_every));
  if (opt.keep >= 0) config.set("keep_checkpoints=" + std::to_string(opt.keep));
  if (opt.sync_save) config.set("async_save=false");
  config.validate(/*with_data=*/!opt.dry_run);  // a dry run reads no data
  return config;
}

// A resumed run keeps the metrics of the steps before `first` (and drops any
// a killed run logged after its last checkpoint: they are computed again),
// rewriting the file atomically; new lines are appended.
void keep_metrics_before(const std::filesystem::path& path, int64_t first) {
  std::ifstream in(path);
  std::string kept, line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() < first)
      kept += line + "\n";
  }
  write_file_atomically(path.string(), kept);
}

void print_comm_stats(const CommStats& stats) {
  for (const auto& [group, kinds] : stats)
    for (const auto& [kind, count] : kinds)
      std::printf("comm %-8s %-15s %8lld calls %14lld bytes\n", group.c_str(), kind.c_str(),
                  static_cast<long long>(count.calls), static_cast<long long>(count.bytes));
}

// Collectives of one step, per axis and kind: {"data": {"all_reduce": {"calls": 3, "bytes": 96}}}.
nlohmann::json comm_delta(const CommStats& before, const CommStats& after) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [group, kinds] : after)
    for (const auto& [kind, count] : kinds) {
      CollectiveCount prev;
      if (auto g = before.find(group); g != before.end())
        if (auto k = g->second.find(kind); k != g->second.end()) prev = k->second;
      if (count.calls == prev.calls) continue;
      out[group][kind] = {{"calls", count.calls - prev.calls},
                          {"bytes", count.bytes - prev.bytes},
                          {"wire_bytes", count.wire_bytes - prev.wire_bytes}};
    }
  return out;
}

// Seconds since this process was started (exec), from /proc/self/stat's
// start time (clock ticks since boot) and CLOCK_BOOTTIME; -1 if unknown.
double seconds_since_exec() {
  std::ifstream in("/proc/self/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)
    if (i == 22) {
      timespec now{};
      clock_gettime(CLOCK_BOOTTIME, &now);
      const double boot = static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
      return boot - std::stod(field) / static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  return -1;
}

// The clock of rank 0's start-up, for print_startup.
struct StartupClock {
  double exec_s = 0;  // process start to run_train
  std::chrono::steady_clock::time_point entered = std::chrono::steady_clock::now();
  double standby_wait_s = 0;
  double save_buffers_s = 0;  // the asynchronous saves' host buffers (periodic_saver.h)
};

// Where rank 0's start-up went, once its first step is done: the line a
// restart's cost is read from (bench/faults.sh, docs/failures.md).
// A standby job (--standby) reports its wait apart, and the time from the
// launcher's go to its first step.
void print_startup(const Trainer& trainer, const StartupClock& clock, double first_step_s) {
  const Trainer::StartupSeconds& t = trainer.startup_seconds();
  const double exec_s = clock.exec_s, standby_wait_s = clock.standby_wait_s;
  const double since_entered = seconds_since(clock.entered);
  const double other = since_entered - standby_wait_s - first_step_s - t.mesh - t.data - t.compile -
                       t.engine - t.load - clock.save_buffers_s;
  std::printf(
      "tessel train: first step done %.2f s after the process started (exec to main %.2f, mesh "
      "and MPI_Init %.2f, data %.2f, compile %.2f, engine %.2f, checkpoint load %.2f, save "
      "buffers %.2f, other %.2f, first step %.2f)",
      std::max(0.0, exec_s) + since_entered - standby_wait_s, exec_s, t.mesh, t.data, t.compile,
      t.engine, t.load, clock.save_buffers_s, other, first_step_s);
  if (standby_wait_s > 0) {
    // After the go: the checkpoint load, what follows the wait, and the step.
    const double after_go = since_entered - standby_wait_s - t.mesh - t.data - t.compile - t.engine;
    std::printf("; a standby: waited %.2f s, first step done %.2f s after the go", standby_wait_s,
                after_go);
  }
  std::printf("\n");
  std::fflush(stdout);
}

// A job across hosts (or TESSEL_HEARTBEAT_SHARED=1) keeps its watchdog
// heartbeats in a directory every host sees: OUT/.heartbeat unless
// TESSEL_HEARTBEAT_DIR names one (comm/heartbeat.h). Before MPI starts.
void use_shared_heartbeats(const std::string& out) {
  if (std::getenv("TESSEL_HEARTBEAT_DIR") != nullptr) return;
  const char* forced = std::getenv("TESSEL_HEARTBEAT_SHARED");
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");
  const bool spans_hosts = local && world && std::atoi(local) < std::atoi(world);
  if ((forced && *forced != '\0' && std::string(forced) != "0") || spans_hosts)
    ::setenv("TESSEL_HEARTBEAT_DIR", (std::filesystem::path(out) / ".heartbeat").c_str(), 1);
}

// Processes of this job: mpirun's world size, else 1.
int launched_ranks() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size ? std::max(1, std::atoi(size)) : 1;
}

// The stop signal any rank received (0: none), agreed by every rank so all
// stop after the same step. Agreeing takes a world all-reduce, a sync point
// that costs several ms a step where ranks share cores (the main job lost
// about 3% of its training time to it), so it runs about once a second of
// training rather than every step: each check also agrees on the next check
// step (the smallest interval any rank proposes from its last step time), so
// every rank checks at the same steps. A single process checks every step.
class AgreedStop {
 public:
  int poll(Trainer& trainer, int64_t step, double last_step_s) {
    if (trainer.distributed().mesh().rank_count() == 1) return stop_signal();
    if (step < next_check_) return 0;
    const double per_check_s = 1.0;
    const int proposal =
        last_step_s > 0 ? static_cast<int>(std::clamp(per_check_s / last_step_s, 1.0, 100.0)) : 1;
    float agreed[2] = {static_cast<float>(stop_signal()), -static_cast<float>(proposal)};
    trainer.distributed().world().all_reduce(agreed, 2, ReduceKind::kMax, "stop signal");
    next_check_ = step + static_cast<int64_t>(-agreed[1]);
    return static_cast<int>(agreed[0]);
  }

 private:
  int64_t next_check_ = 0;
};

// Loads the checkpoint `resume` names (a directory, or `auto`: the newest
// under `out` that validates) into every rank; returns the step it resumes at.
int64_t resume_from(Trainer& trainer, const std::string& resume, const std::string& out) {
  std::vector<std::string> skipped;  // damaged checkpoints `auto` passed over
  const std::string dir = resolve_resume(resume, out, &skipped);
  if (trainer.is_root())
    for (const std::string& s : skipped)
      std::fprintf(stderr, "warning: --resume auto: skipped damaged checkpoint %s\n", s.c_str());
  trainer.load_checkpoint(dir);
  const int64_t first_step = trainer.steps_done();
  if (trainer.is_root()) {
    const CheckpointInfo info = read_checkpoint_info(dir);
    const nlohmann::json saved = info.state.value("saved_on", nlohmann::json());
    std::printf("resuming from %s at step %lld (saved on %s)\n", dir.c_str(),
                static_cast<long long>(first_step),
                saved.is_null() ? "an unknown layout" : saved.dump().c_str());
    const std::vector<std::string> drift = config_drift(info.config, trainer.config());
    if (!drift.empty())
      std::fprintf(stderr,
                   "warning: resuming with %zu key(s) changed from the checkpoint's config, "
                   "which the run follows from here: %s\n",
                   drift.size(), str_join(drift, ", ").c_str());
  }
  return first_step;
}

// A standby job (--standby) has started up; it waits here until the launcher
// needs it. Returns the checkpoint to resume ("" for none), or nullopt when
// told to quit; every other run resumes what --resume says.
std::optional<std::string> wait_if_standby(Trainer& trainer, const TrainOptions& opt,
                                           StartupClock& clock) {
  if (opt.standby.empty()) return opt.resume;
  if (trainer.distributed().mesh().rank_count() > 1) {  // every rank has started up
    float started = 1;
    trainer.distributed().world().all_reduce(&started, 1, ReduceKind::kSum, "standby ready");
  }
  if (trainer.is_root()) write_ready(opt.standby);  // the launcher reports it (standby.h)
  const auto wait_start = std::chrono::steady_clock::now();
  const std::optional<std::string> go = wait_for_go(opt.standby);
  if (!go) return std::nullopt;
  clock.standby_wait_s = seconds_since(wait_start);
  return *go;
}

// Rank 0's first lines: the recompute choice, the model, mesh and baseline.
void print_run_header(Trainer& trainer, const TrainConfig& config) {
  const Task& task = trainer.task();
  if (const RecomputeChoice* choice = trainer.recompute_choice())
    std::printf("%s", choice->report().c_str());
  if (config.precision == "bf16") std::printf("%s\n", kernels::bf16_matmul_note().c_str());
  std::printf(
      "tessel train: %s, %lld parameters on mesh %s, %.2f GFLOP/step, arena %.1f MiB "
      "per rank, %d threads per rank\n",
      config.model.c_str(), static_cast<long long>(trainer.parameter_count()),
      trainer.distributed().mesh().to_string().c_str(), trainer.flops_per_step() / 1e9,
      trainer.arena_bytes() / 1048576.0, trainer.threads());
  std::printf("baseline loss to beat (%s): %.4f nats\n", task.baseline_name(),
              task.baseline_loss());
  std::fflush(stdout);
}

// Rank 0's OUT/metrics.jsonl: one JSON line per step, flushed as written.
// A resumed run keeps the lines of the steps before it (keep_metrics_before).
class MetricsLog {
 public:
  MetricsLog(const std::string& out, bool root, bool resumed, int64_t first_step)
      : path_((std::filesystem::path(out) / "metrics.jsonl").string()) {
    if (!root) return;
    if (resumed) keep_metrics_before(path_, first_step);
    file_.open(path_, std::ios::out | std::ios::app);
    if (!file_) TS_THROW("cannot write metrics to '", path_, "'");
  }
  void append(const nlohmann::json& line, int64_t step) {
    file_ << line.dump() << "\n";
    file_.flush();
    if (!file_)
      TS_THROW("writing '", path_, "' failed at step ", step,
               " (disk full or I/O error); the file may end mid-line");
  }

 private:
  std::string path_;
  std::ofstream file_;
};

// What the parts of a run are; each stage below reads them.
struct TrainRun {
  const TrainOptions& opt;
  const TrainConfig& config;  // as loaded (trainer.config() resolves recompute)
  Trainer& trainer;
  PeriodicSaver& saver;
  MetricsLog& metrics;
  Progress& progress;
};

// What the step loop leaves for the end of the run.
struct LoopOutcome {
  EvalResult last_eval{-1, -1};
  double last_loss = 0;
  int stopped_by = 0;  // the signal that stopped training early (0: none)
  int64_t steps_done = 0;
};

// The metrics line of step s: its loss, rate and collectives.
nlohmann::json step_line(Trainer& trainer, int64_t s, const StepResult& r, double seconds,
                         const CommStats& before, const CommStats& after) {
  nlohmann::json line = {{"step", s},
                         {"loss", r.loss},
                         {"lr", r.lr},
                         {"grad_norm", r.grad_norm},
                         {"step_ms", seconds * 1e3},
                         {"data_ms", r.data_ms},
                         {"tokens_per_s", trainer.items_per_step() / seconds},
                         {"gflops", trainer.flops_per_step() / seconds / 1e9}};
  if (!after.empty()) line["comm"] = comm_delta(before, after);
  if (!r.data.is_null()) line["data"] = r.data;
  return line;
}

// Evaluates after step s when eval_every says so, and after the last step,
// adding the loss, accuracy and time to its line. Returns whether it did.
bool evaluate_if_due(const TrainRun& run, int64_t s, nlohmann::json& line, EvalResult& last) {
  const TrainConfig& config = run.config;
  const bool due =
      (config.eval_every > 0 && (s + 1) % config.eval_every == 0) || s + 1 == config.steps;
  if (!due) return false;
  const auto eval_start = std::chrono::steady_clock::now();
  last = run.trainer.evaluate();
  line["eval_ms"] = seconds_since(eval_start) * 1e3;
  line["val_loss"] = last.loss;
  if (last.accuracy) line["val_accuracy"] = *last.accuracy;
  return true;
}

// Saves a periodic checkpoint after step s when checkpoint_every says so,
// adding the stall it caused to its line.
void checkpoint_if_due(const TrainRun& run, int64_t s, nlohmann::json& line) {
  const TrainConfig& config = run.config;
  if (config.checkpoint_every <= 0 || (s + 1) % config.checkpoint_every != 0) return;
  auto save_start = std::chrono::steady_clock::now();
  run.saver.save(s + 1);
  if (config.async_save) line["save_wait_ms"] = run.saver.wait_ms();  // part of the stall
  line["save_stall_ms"] = seconds_since(save_start) * 1e3;
}

// The steps from `first_step` to the config's end, or to an agreed stop signal.
LoopOutcome run_steps(const TrainRun& run, int64_t first_step, bool resumed,
                      const StartupClock& clock) {
  Trainer& trainer = run.trainer;
  const bool root = trainer.is_root();
  trainer.distributed().reset_stats();
  LoopOutcome out;
  AgreedStop stop;
  double last_step_s = 0;
  out.steps_done = first_step;
  for (int64_t s = first_step; s < run.config.steps; ++s) {
    if ((out.stopped_by = stop.poll(trainer, s, last_step_s)) != 0) break;
    const CommStats before = trainer.distributed().stats();
    auto t0 = std::chrono::steady_clock::now();
    StepResult r = trainer.step();
    double seconds = seconds_since(t0);
    last_step_s = seconds;
    const bool finishing = run.saver.finishing();
    const double finish_ms = run.saver.finish();  // the previous step's snapshot
    const CommStats after = trainer.distributed().stats();
    out.last_loss = r.loss;
    if (s == first_step && root) print_startup(trainer, clock, seconds);
    if (!std::isfinite(r.loss)) TS_THROW("step ", s, ": loss is ", r.loss, " (diverged)");
    nlohmann::json line = step_line(trainer, s, r, seconds, before, after);
    if (s == first_step && resumed)  // where the report marks the restart
      line["resumed"] = {{"mesh", trainer.distributed().mesh().to_string()},
                         {"layout", trainer.distributed().layout().to_string()}};
    if (finishing) line["save_finish_ms"] = finish_ms;  // a stall too (not in step_ms)
    const bool evaluated = evaluate_if_due(run, s, line, out.last_eval);
    out.steps_done = s + 1;
    checkpoint_if_due(run, s, line);
    if (!root) continue;
    run.metrics.append(line, s);
    run.progress.update(s + 1, r.loss, trainer.items_per_step() / seconds,
                        trainer.flops_per_step() / seconds / 1e9,
                        evaluated ? out.last_eval.loss : -1);
  }
  return out;
}

// After the loop: the last writes, the final checkpoint, then (unless a
// signal stopped the run) the measured memory, summary.json and the closing
// lines. Returns the exit code.
int finish_run(const TrainRun& run, const LoopOutcome& loop) {
  Trainer& trainer = run.trainer;
  const TrainConfig& config = run.config;
  const bool root = trainer.is_root();
  run.saver.finish();
  const CommStats stats = trainer.distributed().stats();
  run.saver.wait_for_writes();  // the last periodic write, before the final save
  RunEnd end;
  end.last_eval = loop.last_eval;
  end.last_loss = loop.last_loss;
  end.checkpoint = (std::filesystem::path(run.opt.out) / "checkpoint").string();
  trainer.save_checkpoint(end.checkpoint);
  if (loop.stopped_by != 0) {
    if (root) {
      std::printf(
          "\ntessel train: stopped by %s after %lld of %lld steps; checkpoint saved to %s\n",
          signal_name(loop.stopped_by), static_cast<long long>(loop.steps_done),
          static_cast<long long>(config.steps), end.checkpoint.c_str());
      std::fflush(stdout);
    }
    return 128 + loop.stopped_by;
  }
  // Measured after the save, whose full-tensor buffer belongs to the peak.
  end.tracked = trainer.distributed().gather_counts(allocation_stats().peak_bytes);
  end.device = trainer.distributed().gather_counts(
      backend_for(config.device).space_stats(MemorySpace::kDevice).peak_bytes);
  end.rss = trainer.distributed().gather_counts(std::max<int64_t>(0, peak_rss_bytes()));
  end.pipe = trainer.pipeline_stats();                           // collective
  if (!config.trace.empty()) trainer.write_trace(config.trace);  // collective
  if (!root) return 0;
  end.predicted = predict_memory(trainer.config());  // recompute resolved
  write_summary(trainer, config, run.opt.out, end);
  run.progress.finish();
  if (run.opt.comm_stats) {
    std::printf("collectives on rank 0 over %lld steps (training and evaluation):\n",
                static_cast<long long>(config.steps));
    print_comm_stats(stats);
  }
  print_run_end(trainer, config, run.opt.out, end);
  if (is_builtin_transformer(config.model) && config.sample_chars > 0) {
    TextModel model(end.checkpoint);
    std::string text = model.sample(config.sample_prompt, config.sample_chars, 0.8f, config.seed);
    std::printf("sample (temperature 0.8):\n%s%s\n", config.sample_prompt.c_str(), text.c_str());
  }
  return 0;
}

int run_train(const TrainOptions& opt) {
  StartupClock clock{seconds_since_exec()};  // process start to here
  // Before any thread starts (calibrating for --plan auto runs OpenMP teams):
  // every later thread inherits the blocked stop signals (stop_signal.h).
  if (!opt.dry_run) install_stop_handlers();
  TrainConfig config = load_config(opt);
  if (opt.plan == "auto")
    config = apply_auto_plan(opt.config, config, launched_ranks(), launcher_rank() == 0);
  if (opt.dry_run) return run_dry(config);
  use_shared_heartbeats(opt.out);
  Trainer trainer(config);
  // Lock and check --out and every output path before the first step (after
  // the config, mesh and data are known to be good). An error here is on
  // rank 0 only: main aborts every rank.
  if (!config.trace.empty() && !trainer.pipeline())
    TS_THROW("--trace records pipeline actions; this run has no pipeline or micro-batches");
  const std::optional<std::string> resume = wait_if_standby(trainer, opt, clock);
  if (!resume) return 0;
  // A standby told to go with no checkpoint starts from step 0 in place of
  // the failed attempt (standby.h): its files are replaced.
  const bool overwrite = opt.overwrite || (!opt.standby.empty() && resume->empty());
  RunDirectory run_dir({opt.out, config.trace, overwrite, !resume->empty()});
  const int64_t first_step = resume->empty() ? 0 : resume_from(trainer, *resume, opt.out);
  if (trainer.is_root()) print_run_header(trainer, config);
  MetricsLog metrics(opt.out, trainer.is_root(), !resume->empty(), first_step);
  PeriodicSaver saver(trainer, config, opt.out);
  const auto prepare_start = std::chrono::steady_clock::now();
  saver.prepare();
  clock.save_buffers_s = seconds_since(prepare_start);
  Progress progress(config.steps, trainer.task().item_name());
  const TrainRun run{opt, config, trainer, saver, metrics, progress};
  const LoopOutcome loop = run_steps(run, first_step, !resume->empty(), clock);
  return finish_run(run, loop);
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto opt = std::make_shared<TrainOptions>();
  CLI::App* sub = app.add_subcommand("train", "train a model from a JSON config");
  opt->config.add_to(sub);
  sub->add_option("--out", opt->out, "output directory (metrics.jsonl, checkpoint/)");
  sub->add_flag("--overwrite", opt->overwrite,
                "replace the run already in --out (its metrics, summary and checkpoint)");
  sub->add_flag("--comm-stats", opt->comm_stats, "print collective calls and bytes per mesh axis");
  sub->add_option("--plan", opt->plan,
                  "auto: train with `tessel plan`'s top plan for the ranks launched (flags given "
                  "fix their knobs)")
      ->check(CLI::IsMember({"auto"}));
  sub->add_option("--resume", opt->resume,
                  "continue from a checkpoint directory, or 'auto': the newest complete one "
                  "under --out (checkpoints/latest, then checkpoints/step-N, then checkpoint)");
  sub->add_option("--checkpoint-every", opt->checkpoint_every,
                  "also save OUT/checkpoints/step-N/ every N steps (0: only at the end)");
  sub->add_option("--keep", opt->keep, "periodic checkpoints kept (default 2)");
  sub->add_flag("--sync-save", opt->sync_save,
                "write periodic checkpoints on the training thread (default: copy to host "
                "buffers, write in the background)");
  sub->add_option("--standby", opt->standby,
                  "(used by `tessel launch --standby`) start up, then wait until this file says "
                  "go (and which checkpoint to resume) or quit");
  sub->add_flag("--dry-run", opt->dry_run,
                "print each rank's predicted memory (no data, no allocation, no MPI) and exit");
  return {sub, [opt] { return run_train(*opt); }};
}

}  // namespace tessel::cli
