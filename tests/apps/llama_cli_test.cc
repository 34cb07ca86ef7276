// The Llama example end to end through the command line: the committed
// examples/llama-tiny.json (a few steps of it) trains, samples after
// training, and its checkpoint samples again; its dry run predicts memory
// on a data x model mesh.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "common/run_cli.h"
#include "common/test_dir.h"

namespace {

namespace fs = std::filesystem;

std::string example() { return std::string(TESSEL_SOURCE_DIR) + "/examples/llama-tiny.json"; }

TEST(LlamaCli, ExampleTrainsSamplesAndDryRuns) {
  const fs::path dir = tessel::test_dir("tessel_llama_cli");
  const fs::path out = dir / "run";
  tessel::CliResult r = tessel::run_cli(
      "train --config " + example() + " --out " + out.string() +
      " --set steps=3 --set warmup_steps=1 --set eval_every=0 --set eval_batches=1" +
      " --set sample_chars=12 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tessel train: llama, 853120 parameters"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sample (temperature 0.8):"), std::string::npos) << r.output;

  tessel::CliResult s = tessel::run_cli("sample --checkpoint " + (out / "checkpoint").string() +
                                        " --prompt Hello --chars 20");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.output.rfind("Hello", 0), 0u) << s.output;

  tessel::CliResult d =
      tessel::run_cli("train --dry-run --config " + example() + " --mesh data=2,model=2");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("predicted memory per rank (mesh data=2,model=2"), std::string::npos)
      << d.output;
  fs::remove_all(dir);
}

}  // namespace
