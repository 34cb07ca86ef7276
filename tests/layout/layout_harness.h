// The harness of the layout-invariance tests: runs `tessel train` as a
// plain process or under real mpirun and compares runs.
//
// Each run trains a small model from the same seed and is compared with one
// process: the loss of every step and every parameter of the final
// checkpoint (checkpoints hold full tensors whatever the layout), at one
// tolerance for all cases: relative 1e-5, per step for the loss and per
// tensor (||a - b|| / ||b||) for parameters.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "tessel/compile/config.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/recompute_choice.h"
#include "tessel/train/checkpoint/safetensors.h"

namespace tessel {

namespace fs = std::filesystem;
inline constexpr double kRelTol = 1e-5;

inline std::string run(const std::string& cmd, int* status) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  int s = pclose(pipe);
  *status = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  return out;
}

// `mpi_args`: more mpirun options (e.g. the transport: "--mca btl self,tcp").
inline std::string mpirun(int ranks, const std::string& mpi_args = "") {
  return std::string(TESSEL_MPIEXEC) + " --allow-run-as-root --oversubscribe " + mpi_args + " -n " +
         std::to_string(ranks) + " ";
}

inline nlohmann::json gpt_config() {
  return {{"model", "gpt"},    {"n_layer", 2},    {"n_head", 4},       {"d_model", 64},
          {"context", 16},     {"batch", 8},      {"steps", 10},       {"lr", 3e-3},
          {"warmup_steps", 2}, {"eval_every", 5}, {"eval_batches", 2}, {"threads", 1}};
}

// A small Llama (docs/models.md): grouped-query attention with 2 key/value
// heads for 4 query heads, SwiGLU hidden 192. Seed 1, not the default 1234:
// from 1234 one element of block1.attn.wo gets a first gradient that cancels
// to about 1e-8 (1e-5 of the tensor's median), where AdamW's update
// g / (|g| + eps) depends on the sum's rounding, so sequence parallelism
// (another summation order) moves that one weight by 3e-5 and the tensor by
// 1.4e-5 relative, past the tolerance; every other weight is within 2e-6.
// With seeds 1-3 every case is within 4e-6.
inline nlohmann::json llama_config() {
  return {{"model", "llama"},  {"n_layer", 2},      {"n_head", 4},       {"n_kv_head", 2},
          {"d_model", 64},     {"multiple_of", 32}, {"context", 16},     {"batch", 8},
          {"steps", 10},       {"lr", 3e-3},        {"warmup_steps", 2}, {"eval_every", 5},
          {"eval_batches", 2}, {"threads", 1},      {"seed", 1}};
}

inline nlohmann::json mlp_config() {
  return {{"model", "mlp"},  {"data", "fashion-mnist"},
          {"hidden", 64},    {"batch", 32},
          {"steps", 10},     {"lr", 2e-3},
          {"eval_every", 5}, {"eval_batches", 2},
          {"threads", 1}};
}

// A `memory_limit` (bytes) that storing every activation exceeds on the
// config's mesh: the worst rank's plan when every block is recomputed.
inline std::string budget_for_recompute(const nlohmann::json& config, const std::string& mesh,
                                        int64_t microbatches = 1) {
  TrainConfig c = TrainConfig::from_json(config);
  c.mesh = mesh;
  c.microbatches = microbatches;
  c.recompute = "blocks";
  int64_t worst = 0;
  for (const RankMemory& m : predict_memory(c)) worst = std::max(worst, m.total());
  return std::to_string(worst);
}

// The choice `recompute: auto` makes under `limit`, made offline as every rank makes it.
inline std::string auto_choice(const nlohmann::json& config, const std::string& mesh,
                               int64_t microbatches, const std::string& limit) {
  TrainConfig c = TrainConfig::from_json(config);
  c.mesh = mesh;
  c.microbatches = microbatches;
  c.recompute = "auto";
  c.memory_limit = limit;
  return choose_recompute(c).chosen_candidate().spec;
}

struct TrainRun {
  std::vector<nlohmann::json> steps;
  SafetensorsFile params;
  std::string output;  // stdout and stderr of the run
};

class LayoutInvariance : public ::testing::Test {
 protected:
  static fs::path root() {
    static fs::path dir = fs::temp_directory_path() / ("tessel_layout_" + std::to_string(getpid()));
    return dir;
  }
  static void TearDownTestSuite() { fs::remove_all(root()); }

  // Trains `config` with `ranks` processes (0: a plain process) and reads the result.
  // `extra`: more command-line options (e.g. "--microbatches 4"); `mpi_args`:
  // more mpirun options.
  static TrainRun train(const std::string& name, const nlohmann::json& config, int ranks,
                        const std::string& mesh = "", const std::string& layout = "",
                        const std::string& extra = "", const std::string& mpi_args = "") {
    fs::path dir = root() / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump();
    std::string cmd = (ranks > 0 ? mpirun(ranks, mpi_args) : std::string()) + TESSEL_CLI_PATH +
                      " train --config " + (dir / "config.json").string() + " --out " +
                      (dir / "out").string();
    if (!mesh.empty()) cmd += " --mesh " + mesh;
    if (!layout.empty()) cmd += " --layout " + layout;
    if (!extra.empty()) cmd += " " + extra;
    int status = 0;
    std::string output = run(cmd, &status);
    EXPECT_EQ(status, 0) << cmd << "\n" << output;
    return read_run(dir / "out", output, status == 0);
  }

  // `train --plan auto` on `ranks` ranks, with the profile `calibrate
  // --quick` writes first into a private cache under this run's directory;
  // expects the run to announce the plan it took.
  static TrainRun train_plan_auto(const std::string& name, const nlohmann::json& config,
                                  int ranks) {
    const fs::path cache = root() / (name + "_xdg_cache");
    int status = 0;
    const std::string calibrated = run(
        "XDG_CACHE_HOME=" + cache.string() + " " + TESSEL_CLI_PATH + " calibrate --quick --force",
        &status);
    EXPECT_EQ(status, 0) << calibrated;
    TrainRun got =
        train(name, config, ranks, "", "", "--plan auto", "-x XDG_CACHE_HOME=" + cache.string());
    EXPECT_NE(got.output.find("plan auto: the best of"), std::string::npos) << got.output;
    return got;
  }

  // The steps of OUT/metrics.jsonl and, if `finished`, the final parameters.
  static TrainRun read_run(const fs::path& out, const std::string& output, bool finished) {
    TrainRun r;
    r.output = output;
    std::ifstream metrics(out / "metrics.jsonl");
    std::string line;
    while (std::getline(metrics, line)) r.steps.push_back(nlohmann::json::parse(line));
    if (finished) r.params = read_safetensors((out / "checkpoint" / "model.safetensors").string());
    return r;
  }

  static const TrainRun& reference(const std::string& model) {
    static std::map<std::string, TrainRun> cache;
    auto it = cache.find(model);
    if (it == cache.end())
      it = cache
               .emplace(model, train("single_" + model,
                                     model == "gpt"     ? gpt_config()
                                     : model == "llama" ? llama_config()
                                                        : mlp_config(),
                                     0))
               .first;
    return it->second;
  }

  static void expect_same(const TrainRun& got, const TrainRun& want, const std::string& what) {
    ASSERT_EQ(got.steps.size(), want.steps.size()) << what;
    for (size_t s = 0; s < want.steps.size(); ++s) {
      double a = got.steps[s]["loss"], b = want.steps[s]["loss"];
      EXPECT_LE(std::abs(a - b), kRelTol * std::abs(b))
          << what << ": loss at step " << s << ": " << a << " vs " << b;
    }
    ASSERT_EQ(got.params.tensors.size(), want.params.tensors.size()) << what;
    for (const TensorRecord& w : want.params.tensors) {
      const TensorRecord* g = got.params.find(w.name);
      ASSERT_NE(g, nullptr) << what << ": missing " << w.name;
      ASSERT_EQ(g->shape, w.shape) << what << ": " << w.name;
      const float* x = reinterpret_cast<const float*>(g->bytes.data());
      const float* y = reinterpret_cast<const float*>(w.bytes.data());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < w.bytes.size() / 4; ++i) {
        diff += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
        norm += double(y[i]) * y[i];
      }
      EXPECT_LE(std::sqrt(diff), kRelTol * std::sqrt(norm)) << what << ": parameter " << w.name;
    }
  }

  // Every rank of run `name` predicted its memory to the byte: its tensor
  // storage (allocation_stats) and the part of it in the backend's device
  // memory (Backend::space_stats).
  static void expect_memory_exact(const std::string& name) {
    const nlohmann::json summary =
        nlohmann::json::parse(std::ifstream(root() / name / "out" / "summary.json"));
    ASSERT_FALSE(summary["memory_per_rank"].empty()) << name;
    for (const nlohmann::json& r : summary["memory_per_rank"]) {
      EXPECT_EQ(r["measured_peak_tracked_bytes"].get<int64_t>(),
                r["predicted_bytes"]["total"].get<int64_t>())
          << name << " rank " << r["rank"] << "\n"
          << r.dump();
      EXPECT_EQ(r["measured_peak_device_bytes"].get<int64_t>(),
                r["predicted_bytes"]["device"].get<int64_t>())
          << name << " rank " << r["rank"] << "\n"
          << r.dump();
    }
  }

  // Runs `tessel train` on `config` under mpirun with `args`, which must fail
  // on every rank with `message`, within 60 s. Every rank finds a bad setting
  // before any compute; whichever reports first prints "[rank R] error" and
  // aborts the job, so R is not always 0.
  static void expect_fails(const std::string& name, const nlohmann::json& config, int ranks,
                           const std::string& args, const std::string& message) {
    fs::path dir = root() / name;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << config.dump();
    int status = 0;
    std::string cmd = "timeout 60 " + mpirun(ranks) + TESSEL_CLI_PATH + " train --config " +
                      (dir / "config.json").string() + " --out " + (dir / "out").string() + " " +
                      args;
    std::string out = run(cmd, &status);
    EXPECT_NE(status, 0) << cmd << "\n" << out;
    EXPECT_NE(status, 124) << "timed out (hang): " << cmd;
    EXPECT_NE(out.find(message), std::string::npos) << cmd << "\n" << out;
    EXPECT_TRUE(std::regex_search(out, std::regex(R"(\[rank [0-9]+\] error)"))) << out;
  }

  // Bytes and calls of one collective kind on one axis during training step s.
  static std::pair<int64_t, int64_t> comm(const TrainRun& r, int step, const char* axis,
                                          const char* kind) {
    const nlohmann::json& line = r.steps.at(step);
    if (!line.contains("comm") || !line["comm"].contains(axis) ||
        !line["comm"][axis].contains(kind))
      return {0, 0};
    const auto& c = line["comm"][axis][kind];
    return {c["calls"].get<int64_t>(), c["bytes"].get<int64_t>()};
  }
};

}  // namespace tessel
