// `tessel config --list`: every key of the config table is listed with its
// type, default and meaning, and docs/config.md is exactly the command's
// Markdown (regenerate it with the command the page names).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/run_cli.h"
#include "tessel/compile/config.h"

namespace tessel {
namespace {

TEST(ConfigList, ListsEveryKeyWithTypeDefaultAndMeaning) {
  const CliResult r = run_cli("config --list");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const ConfigKeyDoc& k : TrainConfig::key_docs()) {
    EXPECT_FALSE(k.doc.empty()) << k.name << " has no meaning";
    EXPECT_NE(r.output.find(k.name + " "), std::string::npos) << k.name << " not listed";
  }
  EXPECT_NE(r.output.find("\"cpu\""), std::string::npos) << "device's default";
  EXPECT_EQ(TrainConfig::key_docs().size(), TrainConfig::known_keys().size());
}

TEST(ConfigList, DocsConfigMdIsTheCommandsOutput) {
  const CliResult r = run_cli("config --list --markdown");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream file(std::string(TESSEL_SOURCE_DIR) + "/docs/config.md");
  ASSERT_TRUE(file) << "docs/config.md is missing";
  std::stringstream committed;
  committed << file.rdbuf();
  EXPECT_EQ(committed.str(), r.output)
      << "docs/config.md is stale: build/tessel config --list --markdown > docs/config.md";
}

}  // namespace
}  // namespace tessel
