#include "tessel/train/checkpoint/checkpoint_tokenizer.h"

#include <cstdio>
#include <fstream>

#include "tessel/base/error.h"
#include "tessel/train/data/token_file.h"

namespace tessel {

namespace fs = std::filesystem;

constexpr const char* kTokenizerFile = "tokenizer.model";

std::string tokenizer_hash_hex(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

void copy_tokenizer_into(const fs::path& dir, const TrainConfig& config, nlohmann::json& manifest) {
  if (config.tokenizer.empty()) return;
  const fs::path copy = dir / kTokenizerFile;
  std::error_code ec;
  fs::copy_file(config.tokenizer, copy, fs::copy_options::overwrite_existing, ec);
  if (ec)
    TS_THROW("cannot copy tokenizer '", config.tokenizer, "' into the checkpoint: ", ec.message());
  manifest["tokenizer"] = {{"file", kTokenizerFile},
                           {"hash", tokenizer_hash_hex(tokenizer_file_hash(copy.string()))},
                           {"source", config.tokenizer}};
}

std::string checkpoint_tokenizer(const std::string& dir) {
  const fs::path manifest_path = fs::path(dir) / "manifest.json";
  std::ifstream in(manifest_path);
  const nlohmann::json m = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object()) TS_THROW("checkpoint: '", manifest_path.string(), "' is not valid JSON");
  const nlohmann::json config = m.value("config", nlohmann::json::object());
  const bool has_tokenizer = config.is_object() && config.value("tokenizer", "") != "";
  if (!m.contains("tokenizer")) {
    if (has_tokenizer)
      TS_THROW("checkpoint '", dir, "' was trained with tokenizer '", config.value("tokenizer", ""),
               "' but its manifest records no copy of it");
    return "";
  }
  const nlohmann::json& entry = m["tokenizer"];
  if (!entry.is_object() || !entry.value("hash", nlohmann::json()).is_string())
    TS_THROW("checkpoint: '", manifest_path.string(),
             "': key 'tokenizer' must be an object with a string 'hash'");
  const std::string path = (fs::path(dir) / kTokenizerFile).string();
  if (!fs::exists(path))
    TS_THROW("checkpoint '", dir, "' has no ", kTokenizerFile, ", which its manifest records");
  const std::string found = tokenizer_hash_hex(tokenizer_file_hash(path));
  if (found != entry["hash"].get<std::string>())
    TS_THROW("tokenizer '", path, "' does not match checkpoint '", dir, "': hash ", found,
             ", the manifest records ", entry["hash"].get<std::string>());
  return path;
}

void check_resume_tokenizer(const std::string& dir, const TrainConfig& config) {
  if (config.data != "tokens") return;
  const std::string saved = checkpoint_tokenizer(dir);
  const uint64_t saved_hash = saved.empty() ? 0 : tokenizer_file_hash(saved);
  const uint64_t hash = config.tokenizer.empty() ? 0 : tokenizer_file_hash(config.tokenizer);
  if (saved_hash != hash)
    TS_THROW("checkpoint '", dir, "' was trained ",
             saved.empty() ? std::string("on byte-level tokens") : "with tokenizer " + saved,
             "; this run's tokenizer is ",
             config.tokenizer.empty() ? std::string("byte-level") : "'" + config.tokenizer + "'",
             ", which does not match it");
}

}  // namespace tessel
