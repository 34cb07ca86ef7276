// `tessel launch -n N [--max-restarts K] -- train ARGS...`: runs the job under
// Open MPI's mpirun and, when it fails, relaunches it with `--resume auto`
// (the newest complete checkpoint under its --out), up to K times.
//
// Prints each attempt, why it ended and the time it lost (its wall time minus
// the training time of the steps it contributed that a checkpoint kept), and
// at the end the effective training time ratio: the training time of every
// step in the final metrics.jsonl (with its evaluation) over the launcher's
// wall time. Each attempt gets TESSEL_ATTEMPT=0, 1, ... (fault injection
// fires on attempt 0 only).
//
// With --standby, the next attempt is started ahead of need: its ranks do
// everything before their first step (MPI_Init, data, compile, allocations)
// and wait (standby.h); when the running attempt fails, the launcher writes
// the standby's go file with the newest checkpoint, and starts the next
// standby. A restart then costs the checkpoint load and the first step.
// When a standby's rank 0 writes its readiness marker (GO.ready, standby.h),
// the launcher says once how long after its start the standby was ready.
//
// With --elastic MIN, an attempt whose ranks were declared lost (elastic.h)
// is relaunched on the ranks that are left (at least MIN), with the plan
// `tessel plan` ranks first for that count; the checkpoint is resharded.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "command_args.h"
#include "commands.h"
#include "elastic.h"
#include "standby.h"
#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/checkpoint_dirs.h"

namespace tessel::cli {
namespace {

struct LaunchOptions {
  int ranks = 1;
  int max_restarts = 3;
  std::string mpirun = "mpirun";
  bool standby = false;
  int elastic_min = 0;               // 0: relaunch on -n ranks always
  std::vector<std::string> command;  // "train", ARGS...
};

// Training seconds of the steps in [first, end) of OUT/metrics.jsonl: each
// step's time (step_ms) and its evaluation (eval_ms), the work the job asked
// for. Periodic saves' stalls (save_stall_ms) are not training.
double training_seconds(const std::string& out, int64_t first, int64_t end) {
  std::ifstream in(std::filesystem::path(out) / "metrics.jsonl");
  std::string line;
  double ms = 0;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j.contains("step_ms")) continue;
    const int64_t s = j["step"].get<int64_t>();
    if (s < first || s >= end) continue;
    ms += j["step_ms"].get<double>();
    if (j.contains("eval_ms")) ms += j["eval_ms"].get<double>();
  }
  return ms / 1e3;
}

// The step of the last line of OUT/metrics.jsonl (-1: none yet).
int64_t newest_logged_step(const std::string& out) {
  std::ifstream in(std::filesystem::path(out) / "metrics.jsonl", std::ios::ate);
  if (!in) return -1;
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 8192));
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  const nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
  return j.is_object() && j.contains("step") && j["step"].is_number_integer()
             ? j["step"].get<int64_t>()
             : -1;
}

// Waits (at most 10 s) until no process holds OUT/.lock: mpirun can exit
// before the kernel has finished a SIGKILLed rank 0 and released its lock,
// and the next attempt would find --out in use.
void wait_for_unlocked(const std::string& out) {
  const std::string path = (std::filesystem::path(out) / ".lock").string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no run has locked it yet
  const timespec poll{0, 2'000'000};
  for (int i = 0; i < 5000 && ::flock(fd, LOCK_EX | LOCK_NB) != 0; ++i) nanosleep(&poll, nullptr);
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

// The step the newest complete checkpoint under `out` resumes at (0: none).
int64_t resumable_step(const std::string& out) {
  const std::string dir = newest_checkpoint(out);
  return dir.empty() ? 0 : read_checkpoint_info(dir).step;
}

pid_t spawn(const std::vector<std::string>& argv) {
  std::vector<char*> c;
  for (const std::string& a : argv) c.push_back(const_cast<char*>(a.c_str()));
  c.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = ::fork();
  if (pid < 0) TS_THROW("launch: fork failed");
  if (pid == 0) {
    ::execvp(c[0], c.data());
    std::fprintf(stderr, "launch: cannot run '%s'\n", c[0]);
    std::_Exit(127);
  }
  return pid;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return "mpirun killed by signal " + std::to_string(WTERMSIG(status));
  const int code = WEXITSTATUS(status);
  // mpirun reports a rank killed by signal S as exit status 128 + S.
  return str_cat("exit status ", code,
                 code > 128 ? str_cat(" (a rank died of signal ", code - 128, ")") : "");
}

// SIGINT/SIGTERM to the launcher: stop the job (no restart) and report.
volatile std::sig_atomic_t g_launcher_stop = 0;
extern "C" void on_launcher_stop(int sig) { g_launcher_stop = sig; }

using Clock = std::chrono::steady_clock;

// One mpirun job of the launcher: the active attempt, or a standby.
struct Job {
  pid_t pid = -1;
  int attempt = 0;
  std::string go_file;  // standby jobs only
  Clock::time_point started;
  bool ready_reported = false;  // standby jobs: "ready" printed
};

// Removes a standby job's go file and readiness marker (none: no error).
void remove_standby_files(const Job& job) {
  if (job.go_file.empty()) return;
  std::error_code ec;
  std::filesystem::remove(job.go_file, ec);
  std::filesystem::remove(ready_file(job.go_file), ec);
}

// Prints once, when its readiness marker exists, how long after its start
// the standby `job` got ready: the marker's age is taken off
// the time since the start, so the launcher's poll interval does not count.
void report_ready(Job& job) {
  if (job.pid < 0 || job.go_file.empty() || job.ready_reported) return;
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(ready_file(job.go_file), ec);
  if (ec) return;  // not ready yet
  job.ready_reported = true;
  const double age =
      std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - written)
          .count();
  std::printf("launch: standby for attempt %d ready (%.1f s after its start)\n", job.attempt,
              std::max(0.0, seconds_since(job.started) - std::max(0.0, age)));
  std::fflush(stdout);
}

class Launcher {
 public:
  explicit Launcher(const LaunchOptions& opt)
      : opt_(opt), ranks_(opt.ranks), command_(opt.command) {
    std::error_code ec;
    self_ = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (self_.empty()) TS_THROW("launch: cannot find this executable (/proc/self/exe)");
    out_ = option_value(opt.command, "--out", "runs/latest");
    lost_dir_ = (std::filesystem::path(out_) / ".lost").string();
    take_lost_ranks(lost_dir_, ranks_);  // markers a previous launch left
    ::setenv("TESSEL_LOST_DIR", lost_dir_.c_str(), 1);
    // When a rank dies, Open MPI's daemon sends the others SIGTERM and, only
    // after odls_base_sigkill_timeout (1 s by default), SIGKILL; they are
    // blocked in a collective with the dead rank and cannot save anything, so
    // the grace only delays the restart (measured: 2.3 s vs 0.25 s on the
    // main job). The user's own setting wins.
    ::setenv("OMPI_MCA_odls_base_sigkill_timeout", "0", 0);
    ::setenv("TESSEL_LAUNCHER_PID", std::to_string(::getpid()).c_str(), 1);
  }

  int run();

 private:
  // mpirun ARGS tessel train ... for `attempt`, with `train_args`.
  std::vector<std::string> argv_for(int attempt, const std::vector<std::string>& train_args) {
    std::vector<std::string> argv = {opt_.mpirun};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    const int jobs = opt_.standby ? 2 : 1;  // a standby job's ranks run beside the active ones
    if (jobs * ranks_ > static_cast<int>(std::thread::hardware_concurrency()))
      argv.push_back("--oversubscribe");
    argv.insert(argv.end(),
                {"-n", std::to_string(ranks_), "-x", "TESSEL_ATTEMPT", "-x", "TESSEL_LAUNCHER_PID",
                 "-x", "OMPI_MCA_odls_base_sigkill_timeout", "-x", "TESSEL_LOST_DIR"});
    // Where `--plan auto` finds this machine's profile.
    if (std::getenv("XDG_CACHE_HOME")) argv.insert(argv.end(), {"-x", "XDG_CACHE_HOME"});
    if (std::getenv("TESSEL_FAULT_INJECT")) argv.insert(argv.end(), {"-x", "TESSEL_FAULT_INJECT"});
    argv.push_back(self_);
    argv.insert(argv.end(), train_args.begin(), train_args.end());
    ::setenv("TESSEL_ATTEMPT", std::to_string(attempt).c_str(), 1);
    return argv;
  }

  // A cold start of `attempt`: resumes from the newest checkpoint if any.
  Job start_cold(int attempt) {
    std::vector<std::string> args = command_;
    if (attempt > 0) {
      args = without_option(args, "--resume");
      if (first_step_ > 0 || !newest_checkpoint(out_).empty()) {
        args.push_back("--resume");
        args.push_back("auto");
      } else if (std::find(args.begin(), args.end(), "--overwrite") == args.end()) {
        // No checkpoint yet (the first one's write died with its rank 0):
        // from step 0, replacing what the failed attempt logged.
        args.push_back("--overwrite");
      }
    }
    const std::vector<std::string> argv = argv_for(attempt, args);
    Job job{spawn(argv), attempt, "", Clock::now()};
    std::printf("launch: attempt %d (from step %lld, mpirun pid %d): %s\n", attempt,
                static_cast<long long>(first_step_), static_cast<int>(job.pid),
                str_join(argv, " ").c_str());
    std::fflush(stdout);
    return job;
  }

  // A standby for `attempt`: starts up now, waits for its go file.
  Job start_standby(int attempt) {
    std::vector<std::string> args = without_option(command_, "--resume");
    const std::string go =
        (std::filesystem::path(out_) / (".standby-" + std::to_string(attempt))).string();
    std::filesystem::remove(go);
    std::filesystem::remove(ready_file(go));  // a stale marker would read as ready
    args.insert(args.end(), {"--standby", go});
    const std::vector<std::string> argv = argv_for(attempt, args);
    Job job{spawn(argv), attempt, go, Clock::now()};
    std::printf("launch: standby for attempt %d started (mpirun pid %d)\n", attempt,
                static_cast<int>(job.pid));
    std::fflush(stdout);
    return job;
  }

  // Tells a standby to quit and waits for it.
  void dismiss(Job& standby) {
    if (standby.pid < 0) return;
    write_quit(standby.go_file);
    while (::waitpid(standby.pid, nullptr, 0) < 0) {
    }
    remove_standby_files(standby);
    standby.pid = -1;
  }

  // The launcher was told to stop: the running job is stopped (mpirun
  // passes the signal on), the standby dismissed, and the ETTR of the steps
  // a checkpoint kept is printed.
  int stop(Job& active, Job& standby, Clock::time_point start, double lost) {
    const int sig = g_launcher_stop;
    std::printf("launch: stopping on signal %d\n", sig);
    std::fflush(stdout);
    ::kill(active.pid, SIGTERM);
    while (::waitpid(active.pid, nullptr, 0) < 0) {
    }
    remove_standby_files(active);  // a standby that took over
    dismiss(standby);
    const int64_t kept = resumable_step(out_);
    const double wall = seconds_since(start);
    const double training = training_seconds(out_, 0, kept);
    std::printf(
        "launch: stopped after %d attempt(s), %.1f s lost to failures; ETTR %.3f (training %.1f "
        "s of the %lld steps a checkpoint kept / wall %.1f s)\n",
        active.attempt + 1, lost, training / wall, training, static_cast<long long>(kept), wall);
    return 128 + sig;
  }

  // After a failed attempt: if ranks were declared lost, shrinks the job to
  // the ranks left (--elastic) and says so. False if the job cannot go on.
  bool shrink_for_lost_ranks(Job& standby) {
    const LostRanks taken = take_lost_ranks(lost_dir_, ranks_);
    for (const std::string& name : taken.ignored) {
      std::printf("launch: ignoring %s/%s: it names no rank of this %d-rank job\n",
                  lost_dir_.c_str(), name.c_str(), ranks_);
    }
    const std::vector<int>& lost = taken.ranks;
    if (lost.empty()) return true;
    const std::string names = str_join(lost, ", ");
    if (opt_.elastic_min == 0) {
      std::printf(
          "launch: rank(s) %s declared lost; without --elastic the job restarts on %d ranks\n",
          names.c_str(), ranks_);
      return true;
    }
    const int alive = ranks_ - static_cast<int>(lost.size());
    if (alive < opt_.elastic_min) {
      std::printf("launch: rank(s) %s declared lost; %d rank(s) left, fewer than --elastic %d\n",
                  names.c_str(), alive, opt_.elastic_min);
      return false;
    }
    std::string why;
    const std::optional<ElasticRelaunch> next =
        plan_elastic_relaunch(command_, alive, opt_.elastic_min, &why);
    if (!next) {
      std::printf(
          "launch: rank(s) %s declared lost; no plan for %d to %d ranks (--elastic %d): %s\n",
          names.c_str(), opt_.elastic_min, alive, opt_.elastic_min, why.c_str());
      return false;
    }
    dismiss(standby);  // started for the old rank count
    std::printf(
        "launch: rank(s) %s declared lost; relaunching on %d of the %d ranks left with "
        "the plan%s\n",
        names.c_str(), next->ranks, alive, next->plan_flags.c_str());
    std::fflush(stdout);
    ranks_ = next->ranks;
    command_ = next->command;
    return true;
  }

  const LaunchOptions& opt_;
  int ranks_;                         // ranks of the next attempt (--elastic shrinks it)
  std::vector<std::string> command_;  // its train command (--elastic: with --plan auto)
  std::string self_, out_, lost_dir_;
  int64_t first_step_ = 0;
};

int Launcher::run() {
  struct sigaction sa {};
  sa.sa_handler = on_launcher_stop;  // no SA_RESTART: waitpid returns EINTR
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a closed output must not kill the launcher and orphan its jobs
  std::error_code ec;
  std::filesystem::create_directories(out_, ec);  // the standby's go files live there
  const auto start = Clock::now();
  double lost = 0;
  int attempt = 0, standby_failures = 0;
  Job active = start_cold(0);
  Job standby;
  // The next standby starts once the running attempt has taken a new step:
  // started together, they compete for the cores, and the attempt's first
  // step (the restart's critical path) took three times as long.
  int standby_due = opt_.standby && opt_.max_restarts > 0 ? 1 : 0;
  auto due_since = std::filesystem::file_time_type::clock::now();  // metrics written after this
  auto make_due = [&](int next) {  // a standby for attempt `next`, once a new step is logged
    standby_due = next;
    due_since = std::filesystem::file_time_type::clock::now();
  };
  auto new_step_logged = [&] {
    const std::filesystem::path metrics = std::filesystem::path(out_) / "metrics.jsonl";
    std::error_code e;
    const auto written = std::filesystem::last_write_time(metrics, e);
    return !e && written > due_since && newest_logged_step(out_) >= first_step_;
  };
  for (;;) {
    int status = 0;
    // Polls while a standby is due or not yet ready, else blocks.
    const bool poll = standby_due > 0 || (standby.pid >= 0 && !standby.ready_reported);
    const pid_t pid = ::waitpid(-1, &status, poll ? WNOHANG : 0);
    if (pid < 0 && errno != EINTR) TS_THROW("launch: waitpid failed");
    if (g_launcher_stop != 0) return stop(active, standby, start, lost);
    report_ready(standby);  // also before a take-over removes the marker
    if (pid <= 0) {
      if (standby_due > 0 && new_step_logged()) {
        standby = start_standby(standby_due);
        standby_due = 0;
      } else if (pid == 0) {
        const timespec interval{0, 50'000'000};
        nanosleep(&interval, nullptr);
      }
      continue;
    }
    if (pid == standby.pid) {  // the standby ended before it was needed
      std::printf("launch: the standby for attempt %d ended early (%s)\n", standby.attempt,
                  describe(status).c_str());
      remove_standby_files(standby);
      standby.pid = -1;
      if (++standby_failures <= opt_.max_restarts) make_due(standby.attempt);
      continue;
    }
    if (pid != active.pid) continue;
    const double seconds = seconds_since(active.started);
    remove_standby_files(active);  // a standby that took over
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::printf("launch: attempt %d finished in %.1f s\n", attempt, seconds);
      dismiss(standby);
      const double wall = seconds_since(start);
      const double training = training_seconds(out_, 0, INT64_MAX);
      std::printf(
          "launch: %d attempt(s), %.1f s lost to failures; ETTR %.3f (training %.1f s / wall "
          "%.1f s)\n",
          attempt + 1, lost, training / wall, training, wall);
      return 0;
    }
    const int64_t kept = resumable_step(out_);
    const double useful = kept > first_step_ ? training_seconds(out_, first_step_, kept) : 0;
    lost += seconds - useful;
    std::printf(
        "launch: attempt %d failed after %.1f s: %s; newest checkpoint at step %lld, %.1f s lost\n",
        attempt, seconds, describe(status).c_str(), static_cast<long long>(kept), seconds - useful);
    first_step_ = kept;
    const bool shrunk = shrink_for_lost_ranks(standby);  // false: the job cannot go on
    if (!shrunk || attempt == opt_.max_restarts) {
      dismiss(standby);
      std::printf("launch: giving up%s; %.1f s lost\n",
                  shrunk ? str_cat(" after ", opt_.max_restarts, " restart(s)").c_str() : "", lost);
      return 1;
    }
    ++attempt;
    wait_for_unlocked(out_);
    if (standby.pid >= 0) {
      const std::string dir = newest_checkpoint(out_);
      write_go(standby.go_file, dir);
      std::filesystem::remove(ready_file(standby.go_file), ec);  // it has served
      active = standby;
      active.attempt = attempt;
      active.started = Clock::now();
      std::printf("launch: attempt %d (from step %lld, mpirun pid %d): the standby takes over%s\n",
                  attempt, static_cast<long long>(first_step_), static_cast<int>(active.pid),
                  dir.empty() ? "" : (", resuming " + dir).c_str());
      std::fflush(stdout);
      standby = Job{};
    } else {
      active = start_cold(attempt);
    }
    if (opt_.standby && attempt < opt_.max_restarts) make_due(attempt + 1);
  }
}

int run_launch(const LaunchOptions& opt) {
  if (opt.command.empty() || opt.command[0] != "train")
    TS_THROW("launch: expected `-- train ARGS...` after the launcher's options");
  if (opt.ranks < 1) TS_THROW("launch: -n must be at least 1, got ", opt.ranks);
  if (opt.max_restarts < 0) TS_THROW("launch: --max-restarts must be >= 0");
  if (opt.elastic_min != 0) check_elastic_ready(opt.ranks, opt.elastic_min);
  return Launcher(opt).run();
}

}  // namespace

Command add_launch_command(CLI::App& app) {
  auto opt = std::make_shared<LaunchOptions>();
  CLI::App* sub = app.add_subcommand(
      "launch", "run `train` under mpirun, restarting from the newest checkpoint on failure");
  sub->add_option("-n", opt->ranks, "ranks (mpirun -n)")->required();
  sub->add_option("--max-restarts", opt->max_restarts, "relaunches after a failure (default 3)");
  sub->add_option("--mpirun", opt->mpirun, "the mpirun to use (default: mpirun on PATH)");
  sub->add_flag("--standby", opt->standby,
                "keep a started-up standby job (MPI_Init, data, compile and allocations done) "
                "waiting beside the running one, so a restart only loads the checkpoint");
  sub->add_option("--elastic", opt->elastic_min,
                  "MIN: when ranks are declared lost, relaunch on the ranks left (at least MIN) "
                  "with `tessel plan`'s top plan for them, resharding the checkpoint");
  sub->add_option("command", opt->command, "-- train ARGS...")->required();
  return {sub, [opt] { return run_launch(*opt); }};
}

}  // namespace tessel::cli
