// What `tessel report` knows about one run directory, read tolerantly.
//
// A run directory holds metrics.jsonl (one JSON object per step), summary.json
// (written when the run finishes), checkpoint/manifest.json (the config) and,
// for pipelines run with `--trace DIR/trace.json`, a Chrome trace. Any of them
// may be missing or damaged (a killed run leaves a truncated last line and no
// summary): read_run keeps what parses and records one warning per problem,
// naming the file and line. Only a path that is not a directory is an error.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::report {

struct RunData {
  std::string dir;   // as given
  std::string name;  // short label for legends (the directory's last component)
  // One object per step that parsed, in file order (each has a numeric "step").
  std::vector<nlohmann::json> steps;
  nlohmann::json summary;  // summary.json, or null
  nlohmann::json config;   // the manifest's "config" object, or null
  nlohmann::json trace;    // the Chrome trace, or null
  std::string trace_path;  // where it was read from ("" = none)
  std::vector<std::string> warnings;

  bool has_data() const { return !steps.empty() || !summary.is_null() || !config.is_null(); }
  // A config key from the manifest (or `fallback` when absent).
  nlohmann::json config_value(const std::string& key, const nlohmann::json& fallback) const;
};

// Reads everything readable under `dir`; throws tessel::Error only when
// `dir` does not exist or is not a directory.
RunData read_run(const std::string& dir);

// Runs whose directory names repeat (a/run, b/run) are named by their full
// path instead, so legends stay unambiguous.
void make_names_unique(std::vector<RunData>& runs);

// metrics.jsonl text -> steps; appends a warning per unreadable line
// (`source` names the file in them). Exposed for tests.
std::vector<nlohmann::json> parse_metrics(const std::string& text, const std::string& source,
                                          std::vector<std::string>& warnings);

}  // namespace tessel::report
