// Context parallelism as the CLI shows and refuses it, offline (one process,
// plan-only compiles of every rank): `tessel inspect` lists the all-to-alls
// of Ulysses (q, k and v from S(seq) to S(heads) and the output back, alone
// and nested in tensor parallelism's heads) and the
// ring's sends with their bytes; bad settings are errors before any compute
// naming the dim, the axis and the sizes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/run_cli.h"
#include "common/test_dir.h"

namespace {

class ContextParallelCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tessel::test_dir("context_parallel_cli"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A one-block GPT: batch 4, context 16, 2 heads of 16.
  std::string config(nlohmann::json c = {}) {
    nlohmann::json base = {{"model", "gpt"}, {"n_layer", 1}, {"n_head", 2}, {"d_model", 32},
                           {"context", 16},  {"batch", 4},   {"threads", 1}};
    if (c.is_object()) base.update(c);
    const std::string path = (dir_ / "config.json").string();
    std::ofstream(path) << base.dump();
    return path;
  }

  std::filesystem::path dir_;
};

bool has_line(const std::string& text, const std::vector<std::string>& parts) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    bool all = true;
    for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return true;
    start = end + 1;
  }
  return false;
}

TEST_F(ContextParallelCli, InspectShowsUlyssesAllToAlls) {
  const tessel::CliResult r =
      tessel::run_cli("inspect --config " + config() + " --mesh ctx=2 --layout seq=ctx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* input :
       {"input 0 of attention 'block0.attn.core'", "input 1 of attention 'block0.attn.core'",
        "input 2 of attention 'block0.attn.core'"})
    EXPECT_TRUE(has_line(r.output, {"all_to_all", " on ctx ", "-> S(heads)", input}))
        << input << "\n"
        << r.output;
  EXPECT_TRUE(has_line(r.output, {"all_to_all", " on ctx ", "S(heads)", "-> S(seq)",
                                  "block0.attn.core.out", "output to target"}))
      << r.output;
  // Keys are split where queries are: nothing of attention gathered on ctx.
  EXPECT_FALSE(has_line(r.output, {"all_gather", " on ctx ", "block0.attn."})) << r.output;
  // What runs: q, k, v there and the output back; dout there and dq, dk, dv
  // back. The backward reads the forward's output and log-sum-exp as the
  // forward made them (S(heads)): no conversion of them runs again.
  int all_to_alls = 0;
  for (size_t at = r.output.find("all_to_all "); at != std::string::npos;
       at = r.output.find("all_to_all ", at + 1))
    ++all_to_alls;
  EXPECT_EQ(all_to_alls, 8) << r.output;
  EXPECT_FALSE(has_line(r.output, {"all_to_all", "block0.attn.core.lse"})) << r.output;
}

// Beside tensor parallelism (4 heads of 8, model=2) each model rank's 2
// heads are cut over ctx: q reaches the op [S(heads), S(heads)], and each
// all-to-all sends half of a rank's batch 4 x 8 positions x 2 heads x 8 =
// 512 floats: 1024 B.
TEST_F(ContextParallelCli, InspectShowsUlyssesInsideTheTensorParallelHeads) {
  const tessel::CliResult r =
      tessel::run_cli("inspect --config " + config({{"n_head", 4}}) +
                      " --mesh model=2,ctx=2 --layout heads=model,hidden=model,seq=ctx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_line(r.output, {"all_to_all", " on ctx ", "S(seq)", "-> S(heads)", " 1024 B",
                                  "input 0 of attention 'block0.attn.core'"}))
      << r.output;
  EXPECT_TRUE(has_line(r.output, {"all_to_all", " on ctx ", "S(heads)", "-> S(seq)", " 1024 B",
                                  "block0.attn.core.out"}))
      << r.output;
  EXPECT_FALSE(has_line(r.output, {"all_gather", " on model ", "block0.attn."})) << r.output;
}

TEST_F(ContextParallelCli, InspectShowsTheRingsSends) {
  const tessel::CliResult r = tessel::run_cli("inspect --config " + config() +
                                              " --mesh ctx=2 --layout seq=ctx"
                                              " --set context_parallel=ring");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // q, k and v of a rank: batch 4 x 8 positions x 2 heads x 16 = 1024
  // floats (4096 B) each, lse 64 floats (256 B). The ring: forward, k and v
  // sent once (n - 1 = 1): 8192 B; backward, k, v, dk, dv, then dk, dv
  // home: 6 chunks, 24576 B. The balancing: rank 0 keeps half 0 and sends
  // half 1 (of 4) of each operand, half its bytes: forward q, k, v there
  // and out, lse back (4 x 4096 + 256) / 2 = 8320 B; backward q, dout, out,
  // lse, k, v there and dq, dk, dv back (8 x 4096 + 256) / 2 = 16512 B.
  EXPECT_TRUE(
      has_line(r.output, {"attention ", " on ctx ", "ring", " 16512 B", "block0.attn.core"}))
      << r.output;
  EXPECT_TRUE(has_line(r.output, {"attention_grad", " on ctx ", "ring", " 41088 B"})) << r.output;
  EXPECT_FALSE(has_line(r.output, {"all_to_all", " on ctx ", "attention"})) << r.output;
}

TEST_F(ContextParallelCli, BadSettingsAreRefusedBeforeCompute) {
  struct Case {
    nlohmann::json config;
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {{},
       "--mesh ctx=4 --layout seq=ctx --set context=18",
       "layout maps seq=18 to mesh axis 'ctx' of size 4, which does not divide it"},
      {{},
       "--mesh ctx=4 --layout seq=ctx",
       "'heads' (2) is not divisible by 4; use heads (or kv_heads) divisible by 4"},
      // Beside tensor parallelism ctx cuts each model rank's heads: it must
      // divide them, and come after model in the mesh.
      {{},
       "--mesh model=2,ctx=2 --layout heads=model,seq=ctx",
       "'heads' (2) is not divisible by 2 x 2 of 'model'"},
      {{{"n_head", 4}},
       "--mesh ctx=2,model=2 --layout heads=model,seq=ctx",
       "'heads' (4) is split over mesh axis 'model', listed after 'ctx' (list 'ctx' after "
       "'model' in the mesh to cut its heads further)"},
      {{},
       "--mesh ctx=2 --layout seq=ctx --set context_parallel=ring --set context=18",
       "context_parallel \"ring\": attention 'block0.attn.core' cuts its `seq` (18) into 2 x 2 "
       "= 4 equal half-chunks over mesh axis 'ctx' of size 2"},
      {{{"attention", "unfused"}},
       "--mesh ctx=2 --layout seq=ctx --set context_parallel=ring",
       "context_parallel \"ring\" is set, but the model has no fused attention op"},
      {{{"model", "mlp"}, {"data", "fashion-mnist"}, {"hidden", 64}},
       "--set context_parallel=all_to_all",
       "context_parallel \"all_to_all\" is set, but the model has no fused attention op"},
      {{},
       "--set context_parallel=zigzag",
       "'context_parallel' must be \"all_to_all\" or \"ring\", got \"zigzag\""},
  };
  for (const Case& c : cases) {
    const tessel::CliResult r =
        tessel::run_cli("train --dry-run --config " + config(c.config) + " " + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.args << "\n" << r.output;
  }
}

}  // namespace
