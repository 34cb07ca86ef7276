// The `tessel` command line: bad input gives a clear error and a non-zero
// exit before any compute; the happy path writes metrics and a checkpoint
// that `sample` and `eval` read.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/expect_cli_error.h"
#include "common/run_cli.h"
#include "common/test_dir.h"
#include "tessel/compile/config.h"
#include "tessel/compile/memory_report.h"
#include "tessel/train/host_memory.h"

namespace {

namespace fs = std::filesystem;

using Result = tessel::CliResult;

Result run(const std::string& args) { return tessel::run_cli(args); }

class Cli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tessel::test_dir("tessel_cli"); }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_config(const nlohmann::json& j) {
    std::string path = (dir_ / "config.json").string();
    std::ofstream(path) << j.dump();
    return path;
  }

  static nlohmann::json tiny_gpt() {
    return {{"model", "gpt"},    {"n_layer", 1}, {"n_head", 2}, {"d_model", 32},
            {"context", 16},     {"batch", 4},   {"steps", 4},  {"eval_every", 2},
            {"eval_batches", 2}, {"threads", 1}};
  }

  fs::path dir_;
};

// A whole-number flag below its bound is an error naming the flag and the
// bound (before, -1 was silently taken for "unset", and CLI11's own check
// printed its float limits).
TEST_F(Cli, NegativeCountFlagsAreRefusedByName) {
  const std::string config = write_config(tiny_gpt());
  expect_error(run("train --config " + config + " --threads -2 --dry-run"),
               "--threads: must be a whole number of at least 0, got -2");
  expect_error(run("train --config " + config + " --steps -3 --dry-run"),
               "--steps: must be a whole number of at least 1, got -3");
  expect_error(run("train --config " + config + " --zero -1 --dry-run"),
               "--zero: must be a whole number of at least 0, got -1");
  expect_error(run("train --config " + config + " --microbatches 0 --dry-run"),
               "--microbatches: must be a whole number of at least 1, got 0");
  expect_error(run("bench step --config " + config + " --steps 0"),
               "--steps: must be a whole number of at least 1, got 0");
}

TEST_F(Cli, UnknownKeyIsNamedWithSuggestion) {
  nlohmann::json j = tiny_gpt();
  j["n_layers"] = 2;
  expect_error(run("train --config " + write_config(j) + " --out " + (dir_ / "o").string()),
               "unknown key 'n_layers' (did you mean 'n_layer'?)");
}

TEST_F(Cli, NegativeSizeIsRejected) {
  nlohmann::json j = tiny_gpt();
  j["d_model"] = -32;
  expect_error(run("train --config " + write_config(j)), "'d_model' must be positive");
}

TEST_F(Cli, UnknownPrecisionIsNamed) {
  expect_error(run("train --config " + write_config(tiny_gpt()) + " --set precision=fp16"),
               "'precision' must be \"f32\" or \"bf16\", got \"fp16\"");
}

// A device this build cannot run on is refused by name before any step,
// and an unknown one by the config check; the run directory holds no step.
TEST_F(Cli, UnavailableDeviceIsRefusedBeforeCompute) {
  const fs::path out = dir_ / "o";
  Result r =
      run("train --config " + write_config(tiny_gpt()) + " --device cuda --out " + out.string());
  // Without the CUDA backend, without a GPU, or (on a GPU) the CUDA gate's
  // refusal without TESSEL_UNVERIFIED_CUDA=1: each names the device and a
  // reason.
  expect_error(r, "device cuda: ");
  EXPECT_TRUE(r.output.find("this build of Tessel has no CUDA backend") != std::string::npos ||
              r.output.find("no usable GPU (") != std::string::npos ||
              r.output.find("the CUDA backend has never run on a GPU") != std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step 1"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out / "checkpoint")) << r.output;
  expect_error(run("train --config " + write_config(tiny_gpt()) + " --set device=tpu"),
               "'device' must be \"cpu\" or \"cuda\", got \"tpu\"");
}

// tp_comm_precision: a bad value, and bf16 partial sums in an f32 run, are
// errors naming the key, before any data is read.
TEST_F(Cli, TensorParallelCommPrecisionIsChecked) {
  expect_error(run("train --config " + write_config(tiny_gpt()) + " --set tp_comm_precision=fp8"),
               "'tp_comm_precision' must be \"f32\" or \"bf16\", got \"fp8\"");
  expect_error(
      run("train --config " + write_config(tiny_gpt()) + " --set tp_comm_precision=bf16"),
      "'tp_comm_precision' bf16 carries tensor-parallel partial sums in bf16, which only a bf16 "
      "run rounds to; this run has 'precision' \"f32\"");
}

// oneDNN 2.6 has no bf16 matmul below AVX-512 (forced here with its own ISA
// limit, so the test means the same on every CPU): the run goes ahead on the
// widened-f32 route, says so at the start with the warning that bf16 is
// slower than f32 here, and trains to finite losses.
TEST_F(Cli, Bf16WithoutAvx512RunsOnWidenedOperandsAndSaysSo) {
  setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
  Result r = run("train --config " + write_config(tiny_gpt()) + " --set precision=bf16 --out " +
                 (dir_ / "o").string());
  unsetenv("DNNL_MAX_CPU_ISA");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("precision bf16: matmul on avx2 by f32 GEMM on widened bf16 operands"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("bf16 is slower than f32 here"), std::string::npos) << r.output;
  std::ifstream metrics(dir_ / "o" / "metrics.jsonl");
  std::string line;
  int steps = 0;
  while (std::getline(metrics, line)) {
    const double loss = nlohmann::json::parse(line)["loss"];
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << line;
    ++steps;
  }
  EXPECT_EQ(steps, 4);
}

// The dry run on such a CPU plans the route it would run (exactly: the
// MeasuredMemory bf16 cases check measured == predicted) and names it.
TEST_F(Cli, Bf16DryRunWithoutAvx512NamesTheWidenedRoute) {
  setenv("DNNL_MAX_CPU_ISA", "AVX2", 1);
  Result r = run("train --config " + write_config(tiny_gpt()) + " --set precision=bf16 --dry-run");
  unsetenv("DNNL_MAX_CPU_ISA");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("by f32 GEMM on widened bf16 operands"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the arena counts its scratch"), std::string::npos) << r.output;
}

TEST_F(Cli, HeadsMustDivideModelWidth) {
  nlohmann::json j = tiny_gpt();
  j["n_head"] = 3;
  expect_error(run("train --config " + write_config(j)), "'n_head' (3) must divide 'd_model' (32)");
}

// Only the default data_dir missing names the package; the user's own
// directory or text says what was found and what format is expected.
TEST_F(Cli, MissingDataDirIsNamedWithoutThePackage) {
  nlohmann::json j = tiny_gpt();
  j["data_dir"] = (dir_ / "no-such-dir").string();
  Result r = run("train --config " + write_config(j));
  expect_error(r, "'" + (dir_ / "no-such-dir").string() + "' does not exist");
  EXPECT_EQ(r.output.find("apt-get"), std::string::npos) << r.output;
}

TEST_F(Cli, PlainTextDataDirSaysWhatItFoundAndTheFormat) {
  fs::create_directories(dir_ / "text");
  std::ofstream(dir_ / "text" / "story.txt") << "Once upon a time.\nThe end.\n";
  nlohmann::json j = tiny_gpt();
  j["data_dir"] = (dir_ / "text").string();
  Result r = run("train --config " + write_config(j));
  expect_error(r, "1 entry in 1 file (story.txt)");
  expect_error(r, "lines holding only `%`");
  EXPECT_EQ(r.output.find("apt-get"), std::string::npos) << r.output;
  j["data_dir"] = (dir_ / "text" / "story.txt").string();  // a file, not a directory
  r = run("train --config " + write_config(j));
  expect_error(r, "is a file, not a directory");
  expect_error(r, "lines holding only `%`");
  EXPECT_EQ(r.output.find("apt-get"), std::string::npos) << r.output;
}

TEST_F(Cli, MissingImageDatasetNamesThePackage) {
  nlohmann::json j = {
      {"model", "mlp"}, {"data", "fashion-mnist"}, {"data_dir", (dir_ / "none").string()}};
  expect_error(run("train --config " + write_config(j)), "dataset-fashion-mnist");
}

TEST_F(Cli, WrongTypeIsNamed) {
  nlohmann::json j = tiny_gpt();
  j["batch"] = "eight";
  expect_error(run("train --config " + write_config(j)), "key 'batch'");
}

TEST_F(Cli, OverrideWithUnknownKeyIsRejected) {
  expect_error(run("train --config " + write_config(tiny_gpt()) + " --set lrate=0.1"),
               "unknown key 'lrate'");
}

TEST_F(Cli, TrainWritesMetricsAndCheckpointThatSampleAndEvalRead) {
  fs::path out = dir_ / "run";
  Result r = run("train --config " + write_config(tiny_gpt()) + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream metrics(out / "metrics.jsonl");
  std::string line;
  int lines = 0, with_val = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* key : {"step", "loss", "lr", "tokens_per_s"})
      EXPECT_TRUE(j.contains(key)) << key;
    with_val += j.contains("val_loss");
    ++lines;
  }
  EXPECT_EQ(lines, 4);
  EXPECT_EQ(with_val, 2);
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "manifest.json"})
    EXPECT_TRUE(fs::exists(out / "checkpoint" / f)) << f;

  Result s =
      run("sample --checkpoint " + (out / "checkpoint").string() + " --prompt Hello --chars 20");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.rfind("Hello", 0), 0u) << s.output;
  EXPECT_GE(s.output.size(), 25u);

  std::string text = (dir_ / "text.txt").string();
  std::ofstream(text) << std::string(200, 'a')
                      << "some more text to score, long enough for windows";
  Result e = run("eval --checkpoint " + (out / "checkpoint").string() + " --data " + text);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto j = nlohmann::json::parse(e.output.substr(e.output.find('{')));
  EXPECT_GT(j["nats_per_byte"].get<double>(), 0.0);
  EXPECT_NEAR(j["bits_per_byte"].get<double>(), j["nats_per_byte"].get<double>() / std::log(2.0),
              1e-5);
}

// A memory budget the plan cannot meet stops the run before any data is
// loaded, with the breakdown and the settings that would fit.
TEST_F(Cli, MemoryLimitFailsBeforeComputeAndSuggestsWhatFits) {
  nlohmann::json j = tiny_gpt();
  j["data_dir"] = (dir_ / "no-such-dir").string();  // the data would only be loaded after the check
  Result r = run("train --config " + write_config(j) + " --memory-limit 64KiB");
  expect_error(r, "over the limit of 0.06 MiB");
  EXPECT_NE(r.output.find("training arena"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--recompute blocks"), std::string::npos) << r.output;
  Result fits =
      run("train --config " + write_config(tiny_gpt()) + " --memory-limit 1GiB --dry-run");
  EXPECT_EQ(fits.exit_code, 0) << fits.output;
  EXPECT_NE(fits.output.find("fits in --memory-limit 1GiB"), std::string::npos) << fits.output;
  expect_error(run("train --config " + write_config(tiny_gpt()) + " --memory-limit lots"),
               "memory size 'lots'");
  // From ZeRO 1 on a data axis: each other setting once, the higher stages after it.
  Result zero1 = run("train --config " + write_config(tiny_gpt()) +
                     " --mesh data=2 --zero 1 --memory-limit 64KiB --dry-run");
  const std::string& out = zero1.output;
  const size_t once = out.find("--zero 1 --recompute blocks");
  EXPECT_NE(once, std::string::npos) << out;
  EXPECT_EQ(out.find("--zero 1 --recompute blocks", once + 1), std::string::npos) << out;
  EXPECT_LT(once, out.find("--zero 3 --recompute blocks")) << out;
  EXPECT_EQ(out.find("--zero 0"), std::string::npos) << out;
}

// A model no host can hold (16 TB of parameters, moments and gradients) is
// refused before anything is allocated, naming its memory and the host's.
TEST_F(Cli, ARunLargerThanTheHostIsRefusedBeforeAllocating) {
  nlohmann::json j = tiny_gpt();
  j["d_model"] = 131072, j["n_head"] = 1024, j["n_layer"] = 5;
  Result r = run("train --config " + write_config(j));
  expect_error(r, "more than this host has");
  EXPECT_NE(r.output.find("rank 0 needs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("optimizer state"), std::string::npos) << r.output;
}

// `--recompute auto` needs a budget, prints its choice in a dry run, and
// stops before loading data when nothing fits; a bad policy names the key.
TEST_F(Cli, RecomputeAutoChoosesWithinTheMemoryLimit) {
  const std::string config = write_config(tiny_gpt());
  expect_error(run("train --config " + config + " --recompute auto --dry-run"),
               "needs 'memory_limit'");
  Result dry = run("train --config " + config + " --recompute auto --memory-limit 1GiB --dry-run");
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  for (const char* part : {"recompute auto: chose none", "fits, chosen",
                           "recompute none, precision f32):", "fits in --memory-limit 1GiB"})
    EXPECT_NE(dry.output.find(part), std::string::npos) << part << " in:\n" << dry.output;
  nlohmann::json j = tiny_gpt();
  j["data_dir"] = (dir_ / "no-such-dir").string();  // the data would only be loaded after the check
  Result none_fits =
      run("train --config " + write_config(j) + " --recompute auto --memory-limit 64KiB");
  expect_error(none_fits, "no recomputation fits the memory limit of 0.06 MiB");
  EXPECT_NE(none_fits.output.find("training arena"), std::string::npos) << none_fits.output;
  expect_error(run("train --config " + config + " --recompute blocks:2 --dry-run"),
               "groups 2 blocks per segment but the model has 1 ('n_layer')");
  expect_error(run("train --config " + config + " --recompute sometimes --dry-run"),
               "'recompute' \"sometimes\" has an unknown part");
}

// A mesh axis no dim maps to would run the whole job on every rank: an
// error before compute (the dry run's too), naming the axis and the dims.
TEST_F(Cli, MeshAxisWithNoDimMappedIsAnError) {
  for (const std::string axis : {"dp", "tensor"}) {
    Result r =
        run("train --config " + write_config(tiny_gpt()) + " --mesh " + axis + "=2 --dry-run");
    expect_error(r, "mesh axis '" + axis + "' has no dim mapped to it");
    expect_error(r, "--layout batch=" + axis);
  }
  EXPECT_EQ(run("train --config " + write_config(tiny_gpt()) + " --mesh dp=2 --layout batch=dp " +
                "--dry-run")
                .exit_code,
            0);
}

// The defaults by axis name map only the dims the model has: the MLP has no
// `heads`, and gets hidden=model.
TEST_F(Cli, MlpOnDataAndModelAxesGetsHiddenOnTheModelAxis) {
  nlohmann::json j = {{"model", "mlp"}, {"data", "fashion-mnist"},
                      {"hidden", 64},   {"batch", 8},
                      {"steps", 2},     {"threads", 1}};
  Result r = run("train --config " + write_config(j) + " --mesh data=2,model=2 --dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// warmup_steps at or beyond steps would make every step warm-up: an error
// when the config (file or --set) says so; --steps alone on the command line
// is a short run of that config, allowed with a note.
TEST_F(Cli, WarmupAtOrBeyondStepsIsAnError) {
  nlohmann::json j = tiny_gpt();  // steps 4
  j["warmup_steps"] = 4;
  expect_error(run("train --config " + write_config(j) + " --dry-run"),
               "'warmup_steps' (4) must be below 'steps' (4)");
  expect_error(
      run("train --config " + write_config(tiny_gpt()) + " --set warmup_steps=10 --dry-run"),
      "'warmup_steps' (10) must be below 'steps' (4)");
  j["warmup_steps"] = 2;
  expect_error(run("train --config " + write_config(j) + " --set steps=2 --dry-run"),
               "'warmup_steps' (2) must be below 'steps' (2)");
  Result r = run("train --config " + write_config(j) + " --steps 2 --dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--steps 2 ends within the warm-up (warmup_steps 2)"), std::string::npos)
      << r.output;
}

TEST_F(Cli, AliasesAndNearKeysGetSuggestions) {
  nlohmann::json j = tiny_gpt();
  j["learning_rate"] = 1e-3;
  expect_error(run("train --config " + write_config(j)),
               "unknown key 'learning_rate' (did you mean 'lr'?)");
  expect_error(run("train --config " + write_config(tiny_gpt()) + " --set warmup=5"),
               "unknown key 'warmup' (did you mean 'warmup_steps'?)");
  Result r = run("train --config " + write_config(tiny_gpt()) + " --set lr_scheduler=wsd");
  expect_error(r, "unknown key 'lr_scheduler' (did you mean 'lr_schedule'?)");
  EXPECT_EQ(r.output.find("did you mean 'schedule'"), std::string::npos) << r.output;
}

// `tessel <args>` on `ranks` ranks under mpirun (not bound to cores), with
// OMP_NUM_THREADS unset (ctest sets it for these tests); stdout and stderr.
Result run_mpirun(int ranks, const std::string& args) {
  const std::string cmd = "env -u OMP_NUM_THREADS " + std::string(TESSEL_MPIEXEC) +
                          " --allow-run-as-root --oversubscribe --bind-to none -n " +
                          std::to_string(ranks) + " " + TESSEL_CLI_PATH + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  Result r;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Without --threads, a rank uses its share of the host's cores: 2 ranks
// under mpirun on this host each get cores / 2.
TEST_F(Cli, DefaultThreadsUnderMpirunShareTheHostsCores) {
  nlohmann::json j = tiny_gpt();
  j.erase("threads");
  j["steps"] = 1;
  j["eval_every"] = 0;
  j["warmup_steps"] = 0;
  const std::string out = (dir_ / "mpi").string();
  Result r = run_mpirun(2, "train --config " + write_config(j) + " --mesh data=2 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const int cores = std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  const int expected = std::max(1, cores / 2);
  EXPECT_NE(r.output.find(", " + std::to_string(expected) + " threads per rank"), std::string::npos)
      << r.output;
  std::ifstream summary(fs::path(out) / "summary.json");
  const nlohmann::json s = nlohmann::json::parse(summary, nullptr, false);
  EXPECT_EQ(s.value("threads_per_rank", -1), expected) << s.dump();
}

// Two ranks that each fit this host's memory but together do not are both
// refused before either allocates (train/host_memory.h). The model is sized
// from this host's memory: each rank needs 60-90% of it.
TEST_F(Cli, RanksThatTogetherExceedTheHostAreRefusedUnderMpirun) {
  const int64_t host = tessel::host_memory_bytes();
  ASSERT_GT(host, 0);
  nlohmann::json j = tiny_gpt();
  j["mesh"] = "data=2";
  auto per_rank = [&](int64_t heads) {  // of 64 dims each, the kernels' limit being 128
    j["n_head"] = heads, j["d_model"] = 64 * heads;
    return tessel::predict_memory(tessel::TrainConfig::from_json(j)).at(0).total();
  };
  int64_t small = 1, large = 2;
  while (per_rank(large) < host * 6 / 10) small = large, large *= 2;
  while (large - small > 1) {
    const int64_t mid = (small + large) / 2;
    (per_rank(mid) < host * 6 / 10 ? small : large) = mid;
  }
  ASSERT_LT(per_rank(large), host * 9 / 10) << large << " heads";
  Result r = run_mpirun(2, "train --config " + write_config(j));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the 2 ranks on this host need"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("more than this host has"), std::string::npos) << r.output;
}

TEST_F(Cli, EvalOnMissingFileIsAnError) {
  expect_error(run("eval --checkpoint " + (dir_ / "nothing").string() + " --data /nonexistent"),
               "checkpoint");
}

}  // namespace
