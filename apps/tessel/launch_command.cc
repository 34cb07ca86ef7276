// `tessel launch -n N [--max-restarts K] -- train ARGS...`: runs the job under
// Open MPI's mpirun and, when it fails, relaunches it with `--resume auto`
// (the newest complete checkpoint under its --out), up to K times.
//
// Prints each attempt, why it ended and the time it lost (its wall time minus
// the training time of the steps it contributed that a checkpoint kept), and
// at the end the effective training time ratio: the training time of every
// step in the final metrics.jsonl over the launcher's wall time. Each attempt
// gets TESSEL_ATTEMPT=0, 1, ... (fault injection fires on attempt 0 only).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "tessel/base/error.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/checkpoint_dirs.h"

namespace tessel::cli {
namespace {

struct LaunchOptions {
  int ranks = 1;
  int max_restarts = 3;
  std::string mpirun = "mpirun";
  std::vector<std::string> command;  // "train", ARGS...
};

// The value of `--name X` or `--name=X` in args, or `fallback`.
std::string option_value(const std::vector<std::string>& args, const std::string& name,
                         const std::string& fallback) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) return args[i].substr(name.size() + 1);
  }
  return fallback;
}

std::vector<std::string> without_option(const std::vector<std::string>& args,
                                        const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      ++i;
      continue;
    }
    if (args[i].rfind(name + "=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

// Training seconds (step_ms) of the steps in [first, end) of OUT/metrics.jsonl.
double training_seconds(const std::string& out, int64_t first, int64_t end) {
  std::ifstream in(std::filesystem::path(out) / "metrics.jsonl");
  std::string line;
  double ms = 0;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("step") || !j.contains("step_ms")) continue;
    const int64_t s = j["step"].get<int64_t>();
    if (s >= first && s < end) ms += j["step_ms"].get<double>();
  }
  return ms / 1e3;
}

// The step the newest complete checkpoint under `out` resumes at (0: none).
int64_t resumable_step(const std::string& out) {
  const std::string dir = newest_checkpoint(out);
  return dir.empty() ? 0 : read_checkpoint_info(dir).step;
}

// Runs argv, waits; returns the wait status.
int run_process(const std::vector<std::string>& argv) {
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
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return status;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return "mpirun killed by signal " + std::to_string(WTERMSIG(status));
  const int code = WEXITSTATUS(status);
  // mpirun reports a rank killed by signal S as exit status 128 + S.
  if (code > 128)
    return "exit status " + std::to_string(code) + " (a rank died of signal " +
           std::to_string(code - 128) + ")";
  return "exit status " + std::to_string(code);
}

int run_launch(const LaunchOptions& opt) {
  if (opt.command.empty() || opt.command[0] != "train")
    TS_THROW("launch: expected `-- train ARGS...` after the launcher's options");
  if (opt.ranks < 1) TS_THROW("launch: -n must be at least 1, got ", opt.ranks);
  if (opt.max_restarts < 0) TS_THROW("launch: --max-restarts must be >= 0");
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) TS_THROW("launch: cannot find this executable (/proc/self/exe)");
  self[len] = '\0';
  const std::string out = option_value(opt.command, "--out", "runs/latest");
  const auto start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  double lost = 0;
  int64_t first_step = 0;
  for (int attempt = 0; attempt <= opt.max_restarts; ++attempt) {
    std::vector<std::string> argv = {opt.mpirun};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    if (opt.ranks > static_cast<int>(std::thread::hardware_concurrency()))
      argv.push_back("--oversubscribe");
    argv.insert(argv.end(), {"-n", std::to_string(opt.ranks), "-x", "TESSEL_ATTEMPT"});
    if (std::getenv("TESSEL_FAULT_INJECT")) argv.insert(argv.end(), {"-x", "TESSEL_FAULT_INJECT"});
    argv.push_back(self);
    std::vector<std::string> args = opt.command;
    if (attempt > 0) {
      args = without_option(args, "--resume");
      if (first_step > 0 || !newest_checkpoint(out).empty()) {
        args.push_back("--resume");
        args.push_back("auto");
      }
    }
    argv.insert(argv.end(), args.begin(), args.end());
    ::setenv("TESSEL_ATTEMPT", std::to_string(attempt).c_str(), 1);
    std::string line;
    for (const std::string& a : argv) line += (line.empty() ? "" : " ") + a;
    std::printf("launch: attempt %d (from step %lld): %s\n", attempt,
                static_cast<long long>(first_step), line.c_str());
    const auto t0 = std::chrono::steady_clock::now();
    const int status = run_process(argv);
    const double seconds = since(t0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::printf("launch: attempt %d finished in %.1f s\n", attempt, seconds);
      const double wall = since(start);
      const double training = training_seconds(out, 0, INT64_MAX);
      std::printf(
          "launch: %d attempt(s), %.1f s lost to failures; ETTR %.3f (training %.1f s / wall "
          "%.1f s)\n",
          attempt + 1, lost, training / wall, training, wall);
      return 0;
    }
    const int64_t kept = resumable_step(out);
    const double useful = kept > first_step ? training_seconds(out, first_step, kept) : 0;
    lost += seconds - useful;
    std::printf(
        "launch: attempt %d failed after %.1f s: %s; newest checkpoint at step %lld, %.1f s "
        "lost\n",
        attempt, seconds, describe(status).c_str(), static_cast<long long>(kept), seconds - useful);
    first_step = kept;
  }
  std::printf("launch: giving up after %d restart(s); %.1f s lost\n", opt.max_restarts, lost);
  return 1;
}

}  // namespace

Command add_launch_command(CLI::App& app) {
  auto opt = std::make_shared<LaunchOptions>();
  CLI::App* sub = app.add_subcommand(
      "launch", "run `train` under mpirun, restarting from the newest checkpoint on failure");
  sub->add_option("-n", opt->ranks, "ranks (mpirun -n)")->required();
  sub->add_option("--max-restarts", opt->max_restarts, "relaunches after a failure (default 3)");
  sub->add_option("--mpirun", opt->mpirun, "the mpirun to use (default: mpirun on PATH)");
  sub->add_option("command", opt->command, "-- train ARGS...")->required();
  return {sub, [opt] { return run_launch(*opt); }};
}

}  // namespace tessel::cli
