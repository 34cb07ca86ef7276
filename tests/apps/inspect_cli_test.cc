// `tessel inspect` prints what one rank will run without running it: here,
// the bytes each collective carries. A bf16 config that carries its
// tensor-parallel partial sums in bf16 (tp_comm_precision) sends half the
// bytes of the f32 partial sums on the model axis, and inspect says so per
// collective and per axis.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/run_cli.h"
#include "common/test_dir.h"

namespace {

// The "bytes sent per step by this rank, per axis" section of inspect's output.
std::map<std::string, double> bytes_per_axis(const std::string& output) {
  std::map<std::string, double> out;
  std::istringstream in(output.substr(output.find("per axis:")));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line) && !line.empty()) {
    std::istringstream fields(line);
    std::string axis;
    double bytes = 0;
    fields >> axis >> bytes;
    out[axis] = bytes;
  }
  return out;
}

// Bytes of the collectives on `axis` that bring a program output to its
// target (inspect's "(output to target)" lines: the gradients).
double output_bytes_on(const std::string& output, const std::string& axis) {
  std::istringstream in(output);
  std::string line;
  double total = 0;
  while (std::getline(in, line)) {
    if (line.find(" on " + axis + " ") == std::string::npos ||
        line.find("(output to target)") == std::string::npos)
      continue;
    std::istringstream fields(line.substr(line.find("->") + 2));
    std::string placement;
    double bytes = 0;
    fields >> placement >> bytes;
    total += bytes;
  }
  return total;
}

int count_of(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// A one-block GPT's config in `dir`: batch 4, context 16, 2 heads of 16.
std::string one_block_gpt(const std::filesystem::path& dir) {
  const std::string config = (dir / "gpt.json").string();
  std::ofstream(config) << nlohmann::json{{"model", "gpt"}, {"n_layer", 1},  {"n_head", 2},
                                          {"d_model", 32},  {"context", 16}, {"batch", 4},
                                          {"threads", 1}}
                               .dump();
  return config;
}

TEST(InspectCli, CountsTheBytesACollectiveCarriesInBf16) {
  const std::filesystem::path dir = tessel::test_dir("inspect_cli");
  const std::string config = one_block_gpt(dir);
  const std::string base = "inspect --config " + config + " --mesh data=2,model=2";
  const tessel::CliResult f32 = tessel::run_cli(base + " --set precision=bf16");
  const tessel::CliResult bf16 =
      tessel::run_cli(base + " --set precision=bf16 --set tp_comm_precision=bf16");
  ASSERT_EQ(f32.exit_code, 0) << f32.output;
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;

  const std::map<std::string, double> a = bytes_per_axis(f32.output);
  const std::map<std::string, double> b = bytes_per_axis(bf16.output);
  ASSERT_GT(a.at("model"), 0);
  // Every model-axis collective of this GPT is a partial sum of an activation
  // (forward) or of its gradient (backward): all of them halve.
  EXPECT_DOUBLE_EQ(b.at("model"), a.at("model") / 2);
  // The data axis carries the f32 gradients (program outputs) in both;
  // only partial sums that are no output go in bf16.
  EXPECT_DOUBLE_EQ(output_bytes_on(bf16.output, "data"), output_bytes_on(f32.output, "data"));
  EXPECT_GT(output_bytes_on(f32.output, "data"), 0);
  EXPECT_LE(b.at("data"), a.at("data"));
  EXPECT_EQ(count_of(f32.output, " B bf16 "), 0) << f32.output;
  EXPECT_GT(count_of(bf16.output, " B bf16 "), 0) << bf16.output;
  std::filesystem::remove_all(dir);
}

// Selective recomputation under sequence parallelism recomputes each
// block's norm outputs from the S(seq) residual stream; the q, k and v
// weight gradients all read the recomputed ln1 output, so one all-gather of
// it serves the three (the lowering shares a conversion among sibling
// readers), as Megatron's backward gathers it once, not an all-to-all of
// each gradient and a reduce-scatter of each product.
TEST(InspectCli, SelectiveUnderSequenceParallelismGathersTheRecomputedNormOnce) {
  const std::filesystem::path dir = tessel::test_dir("inspect_cli_sp");
  const std::string config = one_block_gpt(dir);
  const tessel::CliResult r =
      tessel::run_cli("inspect --config " + config +
                      " --mesh model=2 --layout heads=model,hidden=model,vocab=model,seq=model"
                      " --set recompute=selective");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  std::string line;
  int gathers_for_weight_grads = 0, all_to_alls = 0;
  while (std::getline(in, line)) {
    all_to_alls += line.find("all_to_all ") != std::string::npos;
    gathers_for_weight_grads +=
        line.find("all_gather ") != std::string::npos &&
        line.find("block0.ln1.layernorm (input 0 of einsum") != std::string::npos &&
        line.find(".grad_rhs'") != std::string::npos;
  }
  EXPECT_EQ(gathers_for_weight_grads, 1) << r.output;
  EXPECT_EQ(all_to_alls, 0) << r.output;
  std::filesystem::remove_all(dir);
}

// With offload: activations inspect says how many values the program
// offloads and their pinned host bytes, which the dry run's host column
// counts; without it, nothing.
TEST(InspectCli, SaysWhatOffloadMovesToHostMemory) {
  const std::filesystem::path dir = tessel::test_dir("inspect_cli_offload");
  const std::string config = one_block_gpt(dir);
  const std::string line = "offloaded to pinned host memory (offload: activations): ";
  const tessel::CliResult plain = tessel::run_cli("inspect --config " + config);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find(line), std::string::npos) << plain.output;
  const tessel::CliResult r =
      tessel::run_cli("inspect --config " + config + " --offload activations");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t at = r.output.find(line);
  ASSERT_NE(at, std::string::npos) << r.output;
  std::istringstream fields(r.output.substr(at + line.size()));
  int values = 0;
  fields >> values;
  EXPECT_GT(values, 0) << r.output;
  std::filesystem::remove_all(dir);
}

}  // namespace
