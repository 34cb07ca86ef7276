#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tessel/base/error.h"
#include "tessel/report/run_data.h"

namespace tessel::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool read_text(const fs::path& path, std::string& text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// A whole JSON file, or null with a warning when it is absent or damaged.
json read_json_file(const fs::path& path, const std::string& missing_note,
                    std::vector<std::string>& warnings) {
  std::string text;
  if (!read_text(path, text)) {
    if (!missing_note.empty()) warnings.push_back(str_cat("no ", path.string(), missing_note));
    return nullptr;
  }
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    warnings.push_back(str_cat(path.string(), " is not a JSON object (damaged?); ignored"));
    return nullptr;
  }
  return j;
}

// The trace: DIR/trace.json, or the config's `trace` file if it lies in DIR
// or exists as written (relative to the current directory).
fs::path find_trace(const fs::path& dir, const json& config) {
  std::vector<fs::path> candidates = {dir / "trace.json"};
  if (config.is_object() && config.contains("trace") && config["trace"].is_string()) {
    const fs::path named = config["trace"].get<std::string>();
    if (!named.empty()) {
      candidates.push_back(dir / named.filename());
      candidates.push_back(named);
    }
  }
  for (const fs::path& p : candidates)
    if (fs::is_regular_file(p)) return p;
  return {};
}

}  // namespace

json RunData::config_value(const std::string& key, const json& fallback) const {
  if (config.is_object() && config.contains(key)) return config[key];
  return fallback;
}

std::vector<json> parse_metrics(const std::string& text, const std::string& source,
                                std::vector<std::string>& warnings) {
  std::vector<json> steps;
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  const bool ends_with_newline = !text.empty() && text.back() == '\n';
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool last = in.peek() == std::char_traits<char>::eof();
    if (j.is_discarded() || !j.is_object()) {
      warnings.push_back(last && !ends_with_newline
                             ? str_cat(source, " line ", number,
                                       " is cut off (a killed run?); read the ", steps.size(),
                                       " steps before it")
                             : str_cat(source, " line ", number, " is not a JSON object; skipped"));
      continue;
    }
    if (!j.contains("step") || !j["step"].is_number()) {
      warnings.push_back(str_cat(source, " line ", number, " has no numeric \"step\"; skipped"));
      continue;
    }
    steps.push_back(std::move(j));
  }
  return steps;
}

RunData read_run(const std::string& dir_text) {
  const fs::path dir(dir_text);
  if (!fs::exists(dir)) TS_THROW("report: run directory '", dir_text, "' does not exist");
  if (!fs::is_directory(dir)) TS_THROW("report: '", dir_text, "' is not a directory");
  RunData run;
  run.dir = dir_text;
  run.name = fs::path(dir_text).lexically_normal().filename().string();
  if (run.name.empty())
    run.name = fs::path(dir_text).lexically_normal().parent_path().filename().string();
  if (run.name.empty()) run.name = dir_text;

  const fs::path metrics = dir / "metrics.jsonl";
  std::string text;
  if (read_text(metrics, text)) {
    run.steps = parse_metrics(text, metrics.string(), run.warnings);
    if (run.steps.empty())
      run.warnings.push_back(str_cat(metrics.string(), " holds no steps; no curves for this run"));
  } else {
    run.warnings.push_back(str_cat("no ", metrics.string(), ": no curves for this run"));
  }
  run.summary = read_json_file(dir / "summary.json",
                               " (the run did not finish?): no memory or bubble figures; final "
                               "losses taken from the metrics",
                               run.warnings);
  const json manifest = read_json_file(dir / "checkpoint" / "manifest.json",
                                       ": the config is unknown (no config columns)", run.warnings);
  if (manifest.is_object()) {
    if (manifest.contains("config") && manifest["config"].is_object())
      run.config = manifest["config"];
    else
      run.warnings.push_back(str_cat((dir / "checkpoint" / "manifest.json").string(),
                                     " has no \"config\" object; the config is unknown"));
  }
  const fs::path trace = find_trace(dir, run.config);
  if (!trace.empty()) {
    run.trace = read_json_file(trace, "", run.warnings);
    if (!run.trace.is_null()) run.trace_path = trace.string();
  }
  if (!run.has_data())
    run.warnings.push_back(str_cat(dir_text,
                                   " has nothing readable (metrics, summary or "
                                   "checkpoint manifest)"));
  return run;
}

void make_names_unique(std::vector<RunData>& runs) {
  std::vector<bool> repeated(runs.size(), false);
  for (size_t i = 0; i < runs.size(); ++i)
    for (size_t j = 0; j < runs.size(); ++j)
      if (i != j && runs[i].name == runs[j].name) repeated[i] = true;
  for (size_t i = 0; i < runs.size(); ++i)
    if (repeated[i]) runs[i].name = runs[i].dir;
}

}  // namespace tessel::report
