// `tessel config --list`: every config key with its type, default and
// meaning, from the table that reads the keys (TrainConfig::key_docs), as
// text or as the Markdown of docs/config.md (a test keeps that file equal
// to this output).
#include <cstdio>
#include <string>

#include "commands.h"

namespace tessel::cli {
namespace {

struct ConfigListOptions {
  bool list = false;
  bool markdown = false;
};

// A table cell's text: a '|' would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

void print_markdown(const std::vector<ConfigKeyDoc>& keys) {
  std::printf(
      "# Config keys\n\n"
      "A run is configured by a JSON file (`examples/*.json`) whose keys are below; any key can "
      "be overridden on the command line with `--set key=value`, and a few have flags of their "
      "own (`--steps`, `--threads`, `--device`, `--mesh`, `--layout`, `--zero`, ...). An "
      "unknown key is an error that suggests the nearest one.\n\n"
      "This page is generated: `build/tessel config --list --markdown > docs/config.md` "
      "(a test fails when it differs from the command's output).\n\n"
      "| key | type | default | meaning |\n| --- | --- | --- | --- |\n");
  for (const ConfigKeyDoc& k : keys)
    std::printf("| `%s` | %s | `%s` | %s |\n", k.name.c_str(), k.type.c_str(),
                k.default_value.c_str(), cell(k.doc).c_str());
}

void print_text(const std::vector<ConfigKeyDoc>& keys) {
  for (const ConfigKeyDoc& k : keys)
    std::printf("%-22s %-17s %-14s %s\n", k.name.c_str(), k.type.c_str(), k.default_value.c_str(),
                k.doc.c_str());
}

}  // namespace

Command add_config_command(CLI::App& app) {
  auto opt = std::make_shared<ConfigListOptions>();
  CLI::App* sub = app.add_subcommand("config", "describe the config keys");
  sub->add_flag("--list", opt->list, "every key with its type, default and meaning")->required();
  sub->add_flag("--markdown", opt->markdown, "as the Markdown table of docs/config.md");
  return {sub, [opt] {
            const std::vector<ConfigKeyDoc> keys = TrainConfig::key_docs();
            opt->markdown ? print_markdown(keys) : print_text(keys);
            return 0;
          }};
}

}  // namespace tessel::cli
