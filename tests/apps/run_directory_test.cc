// The output directory of `tessel train`: an existing run is refused unless
// --overwrite, a directory in use by another run is refused, output paths are
// checked before the first step, stale save temporaries are removed, and
// SIGTERM ends a run after the current step with a checkpoint that loads.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/expect_cli_error.h"
#include "common/run_cli.h"
#include "common/test_dir.h"

namespace {

namespace fs = std::filesystem;

using Result = tessel::CliResult;

// Each thread of `pid`: its name and its blocked-signal mask (SigBlk).
struct ThreadSignals {
  std::string name;
  unsigned long long blocked = 0;
};
std::vector<ThreadSignals> thread_signals(pid_t pid) {
  std::vector<ThreadSignals> threads;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    ThreadSignals t;
    std::ifstream(task.path() / "comm") >> t.name;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigBlk:", 0) == 0) t.blocked = std::stoull(line.substr(7), nullptr, 16);
    threads.push_back(t);
  }
  return threads;
}

class RunDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tessel::test_dir("tessel_rundir");
    nlohmann::json j = {{"model", "gpt"}, {"n_layer", 1},     {"n_head", 2}, {"d_model", 32},
                        {"context", 16},  {"batch", 4},       {"steps", 2},  {"eval_every", 0},
                        {"threads", 1},   {"sample_chars", 0}};
    config_ = (dir_ / "config.json").string();
    std::ofstream(config_) << j.dump();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string train(const std::string& out, const std::string& extra = "") {
    return "train --config " + config_ + " --out " + out + " " + extra;
  }

  fs::path dir_;
  std::string config_;
};

TEST_F(RunDirectory, ExistingRunIsRefusedUnlessOverwrite) {
  const std::string out = (dir_ / "run").string();
  ASSERT_EQ(tessel::run_cli(train(out)).exit_code, 0);
  const auto before = fs::last_write_time(fs::path(out) / "metrics.jsonl");
  expect_error(tessel::run_cli(train(out)), "already holds a run (checkpoint/); pass --overwrite");
  EXPECT_EQ(fs::last_write_time(fs::path(out) / "metrics.jsonl"), before);  // untouched
  Result again = tessel::run_cli(train(out, "--overwrite --steps 3"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  std::ifstream metrics(fs::path(out) / "metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line);) ++lines;
  EXPECT_EQ(lines, 3);  // the old run's lines are gone, not appended to
}

// `--resume auto` with a damaged newest checkpoint (a truncated tensor file)
// falls back to the previous one that validates, and warns naming it.
TEST_F(RunDirectory, ResumeAutoSkipsADamagedNewestCheckpoint) {
  const std::string out = (dir_ / "run").string();
  Result first = tessel::run_cli(train(out, "--steps 3 --checkpoint-every 1 --keep 2 --sync-save"));
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const fs::path newest = fs::path(out) / "checkpoints" / "step-3";
  ASSERT_TRUE(fs::exists(fs::path(out) / "checkpoints" / "step-2" / "manifest.json"));
  fs::resize_file(newest / "model.safetensors", fs::file_size(newest / "model.safetensors") / 2);
  Result r = tessel::run_cli(train(out, "--steps 4 --resume auto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string older = (fs::path(out) / "checkpoints" / "step-2").string();
  EXPECT_NE(r.output.find("resuming from " + older + " at step 2"), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find("warning: --resume auto: skipped damaged checkpoint '" + newest.string() + "'"),
      std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
}

// A resume that changes a key of the training (here lr and steps) warns,
// naming each old and new value; one that changes only how the run
// executes (threads) does not.
TEST_F(RunDirectory, AResumeThatChangesTrainingKeysWarnsNamingThem) {
  const std::string out = (dir_ / "run").string();
  ASSERT_EQ(tessel::run_cli(train(out, "--steps 2 --checkpoint-every 1 --sync-save")).exit_code, 0);
  const std::string from = " --resume " + (fs::path(out) / "checkpoints" / "step-1").string();
  Result same = tessel::run_cli(train((dir_ / "same").string(), "--steps 2 --threads 1" + from));
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_EQ(same.output.find("changed from the checkpoint's config"), std::string::npos)
      << same.output;
  Result changed =
      tessel::run_cli(train((dir_ / "changed").string(), "--steps 3 --set lr=0.5" + from));
  ASSERT_EQ(changed.exit_code, 0) << changed.output;
  for (const char* part : {"warning: resuming with 2 key(s) changed from the checkpoint's config, "
                           "which the run follows from here: lr ",
                           " -> 0.5, steps 2 -> 3"})
    EXPECT_NE(changed.output.find(part), std::string::npos) << part << " in:\n" << changed.output;
}

// A resumed run marks its first metrics line with the mesh and layout it
// resumed on, and `tessel report` lists the restart in its header table.
TEST_F(RunDirectory, AResumedRunIsMarkedInItsMetricsAndReport) {
  const std::string out = (dir_ / "run").string();
  ASSERT_EQ(tessel::run_cli(train(out, "--steps 2 --checkpoint-every 1 --sync-save")).exit_code, 0);
  Result r = tessel::run_cli(train(out, "--steps 4 --resume auto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream metrics(fs::path(out) / "metrics.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(metrics, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i].contains("resumed"), i == 2) << lines[i];
  EXPECT_EQ(lines[2]["resumed"]["mesh"], "(single rank)");
  const std::string page = (dir_ / "report.html").string();
  Result report = tessel::run_cli("report " + out + " --out " + page);
  ASSERT_EQ(report.exit_code, 0) << report.output;
  std::ifstream html(page);
  const std::string text((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("<th>restarts</th>"), std::string::npos);
  EXPECT_NE(text.find("<td>step 2 on (single rank)</td>"), std::string::npos);
}

TEST_F(RunDirectory, DirectoryInUseIsRefused) {
  const fs::path out = dir_ / "busy";
  fs::create_directories(out);
  int fd = ::open((out / ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  expect_error(tessel::run_cli(train(out.string())), "is in use by another run");
  ::close(fd);
  EXPECT_FALSE(fs::exists(out / "metrics.jsonl"));
}

TEST_F(RunDirectory, OutputPathsAreCheckedBeforeTheFirstStep) {
  const fs::path out = dir_ / "run";
  expect_error(tessel::run_cli(train(
                   out.string(), "--microbatches 2 --trace " + (dir_ / "no" / "t.json").string())),
               "cannot write --trace file");
  expect_error(tessel::run_cli(train(out.string(), "--trace " + (dir_ / "t.json").string())),
               "--trace records pipeline actions; this run has no pipeline");
  EXPECT_FALSE(fs::exists(out / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(out / "checkpoint"));
  std::ofstream(dir_ / "file") << "x";
  expect_error(tessel::run_cli(train((dir_ / "file").string())), "exists and is not a directory");
}

TEST_F(RunDirectory, StaleSaveTemporariesAreRemoved) {
  const fs::path out = dir_ / "run";
  fs::create_directories(out / "checkpoint.tmp-123456");
  Result r = tessel::run_cli(train(out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(out / "checkpoint.tmp-123456"));
  EXPECT_NE(r.output.find("left by an interrupted save"), std::string::npos) << r.output;
}

TEST_F(RunDirectory, SigtermSavesTheCheckpointAndExitsNonZero) {
  const fs::path out = dir_ / "run";
  const std::string log = (dir_ / "log").string();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(TESSEL_CLI_PATH, TESSEL_CLI_PATH, "train", "--config", config_.c_str(), "--out",
          out.c_str(), "--steps", "1000000", "--threads", "2", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait for the first step's metrics, then signal.
  for (int i = 0;
       i < 600 && !(fs::exists(out / "metrics.jsonl") && fs::file_size(out / "metrics.jsonl") > 0);
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(out / "metrics.jsonl"));
  // No computing thread may run a handler (stop_signal.h: a handler on a
  // thread inside a oneDNN JIT GEMM writes its frame over the heap): each
  // one, OpenMP's included, blocks SIGINT and SIGTERM, and the one thread
  // that takes them with sigwait() shows them unblocked while it waits.
  int waiters = 0, computing = 0;
  for (const ThreadSignals& t : thread_signals(pid)) {
    if (t.name == "stop-signals") {
      ++waiters;
      continue;
    }
    ++computing;
    EXPECT_TRUE(t.blocked & (1ull << (SIGINT - 1))) << t.name << " SigBlk " << t.blocked;
    EXPECT_TRUE(t.blocked & (1ull << (SIGTERM - 1))) << t.name << " SigBlk " << t.blocked;
  }
  EXPECT_EQ(waiters, 1);
  EXPECT_GE(computing, 2) << "the main thread and OpenMP's second thread";
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::ifstream in(log);
  std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << output;
  EXPECT_NE(output.find("stopped by SIGTERM after"), std::string::npos) << output;
  Result sample = tessel::run_cli("sample --checkpoint " + (out / "checkpoint").string() +
                                  " --prompt Hi --chars 5");
  EXPECT_EQ(sample.exit_code, 0) << sample.output;
}

}  // namespace
