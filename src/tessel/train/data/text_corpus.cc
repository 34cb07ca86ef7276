#include "tessel/train/data/text_corpus.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <system_error>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/train/data/text_documents.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

// Splits a fortune file into its fortunes: the text between lines that
// consist of a single `%` (a trailing '\r' is tolerated). Each fortune keeps
// its lines' newlines; blank fortunes are dropped.
std::vector<std::string> split_fortunes(const std::string& text) {
  std::vector<std::string> fortunes;
  std::string current;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    if (line == "%" || line == "%\r") {
      if (!is_blank_text(current)) fortunes.push_back(std::move(current));
      current.clear();
    } else {
      current.append(line);
      current.push_back('\n');
    }
    pos = end + 1;
  }
  if (!is_blank_text(current)) fortunes.push_back(std::move(current));
  return fortunes;
}

constexpr const char* kFortuneFormat =
    "'data' \"fortunes\" reads a directory of fortune files: plain text, entries separated by "
    "lines holding only `%`";

// Up to five of `names`, then how many more.
std::string some_names(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 5; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 5) text += str_cat(" and ", names.size() - 5, " more");
  return text;
}

// A user's data_dir that is missing or not a directory (the default one
// names the package instead).
void check_data_dir(const std::string& dir) {
  std::error_code ec;
  const bool is_default = dir == kDefaultFortunesDir;
  if (fs::is_directory(dir, ec)) return;
  if (is_default) throw Error(fortunes_missing_message(dir, "directory does not exist"));
  if (fs::exists(dir, ec))
    TS_THROW("data_dir '", dir, "' is a file, not a directory; ", kFortuneFormat,
             " (put the file in a directory of its own, with `%` lines between its entries)");
  TS_THROW("data_dir '", dir, "' does not exist; ", kFortuneFormat);
}

}  // namespace

std::string fortunes_missing_message(const std::string& dir, const std::string& why) {
  return str_cat("fortunes corpus is missing: ", why, " in '", dir,
                 "'; install it with `apt-get install fortunes` (or fortunes-min)");
}

TextCorpus TextCorpus::load_fortunes(const std::string& dir) {
  check_data_dir(dir);
  const bool is_default = dir == kDefaultFortunesDir;
  std::error_code ec;
  std::vector<std::string> files, skipped;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    // symlink_status: do not follow *.u8 links (they duplicate the plain files).
    std::error_code status_ec;
    std::string name = it->path().filename().string();
    if (!fs::is_regular_file(it->symlink_status(status_ec)) || status_ec || name.empty() ||
        name[0] == '.' || name.ends_with(".dat") || name.ends_with(".u8")) {
      skipped.push_back(name);
      continue;
    }
    files.push_back(it->path().string());
  }
  if (ec) TS_THROW("cannot list fortunes directory '", dir, "': ", ec.message());
  std::sort(files.begin(), files.end());
  std::sort(skipped.begin(), skipped.end());
  if (files.empty() && is_default)
    throw Error(fortunes_missing_message(dir, "no fortune files found"));
  if (files.empty())
    TS_THROW("no fortune files in '", dir, "' (",
             skipped.empty() ? std::string("it is empty")
                             : str_cat("not read: ", some_names(skipped),
                                       "; *.dat index files, links, hidden files and "
                                       "directories are skipped"),
             "); ", kFortuneFormat);

  TextCorpus corpus;
  int64_t k = 0;
  for (const std::string& path : files) {
    std::vector<std::string> fortunes = split_fortunes(read_text_file(path));
    for (const std::string& fortune : fortunes) {
      std::vector<uint8_t>& out = (k % 10 == 9) ? corpus.val : corpus.train;
      out.insert(out.end(), fortune.begin(), fortune.end());
      out.push_back('\n');
      ++k;
    }
    corpus.sources.push_back(path);
  }
  if (k == 0 && is_default) throw Error(fortunes_missing_message(dir, "no fortune files found"));
  if (corpus.val.empty()) {
    std::vector<std::string> names;
    for (const std::string& f : files) names.push_back(fs::path(f).filename().string());
    TS_THROW("fortunes corpus in '", dir, "' has ", k, k == 1 ? " entry" : " entries", " in ",
             files.size(), files.size() == 1 ? " file (" : " files (", some_names(names),
             "); need at least 10 to form a validation split (every tenth entry). ", kFortuneFormat,
             "; a file without such lines is one entry");
  }
  return corpus;
}

TextCorpus TextCorpus::from_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) TS_THROW("text file '", path, "' does not exist");
  std::string contents = read_text_file(path);
  if (contents.empty()) TS_THROW("text file '", path, "' is empty");
  TextCorpus corpus;
  corpus.val.assign(contents.begin(), contents.end());
  corpus.sources.push_back(path);
  return corpus;
}

double unigram_entropy_nats(const std::vector<uint8_t>& bytes) {
  if (bytes.empty()) return 0.0;
  std::array<int64_t, 256> counts{};
  for (uint8_t b : bytes) ++counts[b];
  double n = static_cast<double>(bytes.size());
  double entropy = 0.0;
  for (int64_t c : counts) {
    if (c == 0) continue;
    double p = static_cast<double>(c) / n;
    entropy -= p * std::log(p);
  }
  return entropy;
}

void sample_text_batch(const std::vector<uint8_t>& data, uint64_t seed, int64_t step,
                       int64_t row_begin, int64_t row_end, int64_t context, int32_t* tokens,
                       int32_t* targets) {
  if (context <= 0) TS_THROW("sample_text_batch: context must be positive, got ", context);
  if (row_begin < 0 || row_end < row_begin)
    TS_THROW("sample_text_batch: invalid row range [", row_begin, ", ", row_end, ")");
  if (row_end > static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
    TS_THROW("sample_text_batch: row ", row_end - 1,
             " exceeds the 2^32 rows a sampler lane can address");
  const int64_t size = static_cast<int64_t>(data.size());
  if (size <= context)
    TS_THROW("sample_text_batch: text of ", size, " bytes is too short for context ", context,
             " (need more than context bytes)");
  if (step < 0) TS_THROW("sample_text_batch: step must be non-negative, got ", step);
  const PhiloxStream stream(seed, "text_batch");
  const uint64_t bound = static_cast<uint64_t>(size - context);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint64_t start =
        stream.below(bound, static_cast<uint64_t>(step), static_cast<uint32_t>(r));
    const uint8_t* src = data.data() + start;
    int32_t* tok = tokens + (r - row_begin) * context;
    int32_t* tgt = targets + (r - row_begin) * context;
    for (int64_t i = 0; i < context; ++i) {
      tok[i] = src[i];
      tgt[i] = src[i + 1];
    }
  }
}

int64_t count_eval_windows(int64_t size, int64_t context) {
  if (context <= 0) TS_THROW("count_eval_windows: context must be positive, got ", context);
  if (size <= 0) return 0;
  return (size - 1) / context;
}

void eval_text_window(const std::vector<uint8_t>& data, int64_t window, int64_t context,
                      int32_t* tokens, int32_t* targets) {
  const int64_t count = count_eval_windows(static_cast<int64_t>(data.size()), context);
  if (window < 0 || window >= count)
    TS_THROW("eval_text_window: window ", window, " out of range; ", data.size(),
             " bytes with context ", context, " give ", count, " windows");
  const uint8_t* src = data.data() + window * context;
  for (int64_t i = 0; i < context; ++i) {
    tokens[i] = src[i];
    targets[i] = src[i + 1];
  }
}

}  // namespace tessel
