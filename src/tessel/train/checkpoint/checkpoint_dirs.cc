#include "tessel/train/checkpoint/checkpoint_dirs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/safetensors.h"

namespace tessel {
namespace fs = std::filesystem;
namespace {

constexpr const char* kLatest = "latest";

// Complete: renamed into place after its manifest was written.
bool complete(const fs::path& dir) { return fs::exists(dir / "manifest.json"); }

// Step directories under OUT/checkpoints, newest first.
std::vector<std::pair<int64_t, fs::path>> step_dirs(const std::string& out) {
  std::vector<std::pair<int64_t, fs::path>> dirs;
  fs::path root = fs::path(out) / "checkpoints";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return dirs;
  static const std::regex name("step-([0-9]{1,18})");
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    std::smatch m;
    const std::string file = e.path().filename().string();
    if (e.is_directory() && std::regex_match(file, m, name))
      dirs.emplace_back(std::stoll(m[1].str()), e.path());
  }
  std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a > b; });
  return dirs;
}

}  // namespace

std::string periodic_checkpoint_dir(const std::string& out, int64_t step) {
  return (fs::path(out) / "checkpoints" / ("step-" + std::to_string(step))).string();
}

void publish_periodic_checkpoint(const std::string& out, int64_t step, int keep) {
  fs::path root = fs::path(out) / "checkpoints";
  const std::string name = "step-" + std::to_string(step);
  if (!complete(root / name))
    TS_THROW("checkpoint '", (root / name).string(), "' is not complete; not publishing it");
  write_file_atomically((root / kLatest).string(), name + "\n");
  int kept = 0;  // newest first; the one just published always stays
  for (const auto& [s, dir] : step_dirs(out))
    if (dir.filename() == name || kept < keep)
      ++kept;
    else
      fs::remove_all(dir);
  // Temporaries of earlier saves that were killed (step-N.tmp-PID, step-N.old-PID):
  // one save runs at a time, and this one has finished.
  static const std::regex stale("step-[0-9]+\\.(tmp|old)-[0-9]+");
  std::error_code ec;
  std::vector<fs::path> stale_dirs;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec))
    if (std::regex_match(e.path().filename().string(), stale)) stale_dirs.push_back(e.path());
  for (const fs::path& p : stale_dirs) fs::remove_all(p, ec);
}

std::string newest_checkpoint(const std::string& out) {
  fs::path root = fs::path(out) / "checkpoints";
  std::ifstream pointer(root / kLatest);
  std::string name;
  if (pointer && std::getline(pointer, name) && !name.empty() &&
      name.find('/') == std::string::npos && complete(root / name))
    return (root / name).string();
  for (const auto& [s, dir] : step_dirs(out))
    if (complete(dir)) return dir.string();
  fs::path final_dir = fs::path(out) / "checkpoint";
  if (complete(final_dir)) return final_dir.string();
  return "";
}

void check_checkpoint_files(const std::string& dir) {
  read_checkpoint_info(dir);
  SafetensorsReader model((fs::path(dir) / "model.safetensors").string());
  for (const char* optional : {"optimizer.safetensors", "tied_copies.safetensors"})
    if (fs::exists(fs::path(dir) / optional))
      SafetensorsReader reader((fs::path(dir) / optional).string());
}

std::string resolve_resume(const std::string& resume, const std::string& out,
                           std::vector<std::string>* skipped) {
  if (resume != "auto") {
    if (!complete(resume))
      TS_THROW("--resume '", resume, "': not a complete checkpoint (no manifest.json there)");
    return resume;
  }
  // Newest first, as newest_checkpoint orders them: the one `latest` names,
  // the step directories, the final checkpoint.
  std::vector<std::string> candidates;
  const std::string newest = newest_checkpoint(out);
  if (newest.empty())
    TS_THROW("--resume auto: no complete checkpoint under '", out,
             "' (looked for checkpoints/latest, checkpoints/step-N/ and checkpoint/)");
  candidates.push_back(newest);
  for (const auto& [s, dir] : step_dirs(out))
    if (complete(dir) && dir.string() != newest) candidates.push_back(dir.string());
  const fs::path final_dir = fs::path(out) / "checkpoint";
  if (complete(final_dir) && final_dir.string() != newest) candidates.push_back(final_dir.string());
  std::string tried;
  for (const std::string& dir : candidates) {
    try {
      check_checkpoint_files(dir);
      return dir;
    } catch (const Error& e) {
      if (skipped) skipped->push_back(str_cat("'", dir, "': ", e.what()));
      tried += str_cat("\n  '", dir, "': ", e.what());
    }
  }
  TS_THROW("--resume auto: no checkpoint under '", out, "' validates; tried, newest first:", tried);
}

}  // namespace tessel
