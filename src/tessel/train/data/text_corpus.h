// Byte-level text corpora and their batch samplers.
//
// A TextCorpus is two byte vectors (train, val) plus the files they came
// from; tokens are raw bytes (vocabulary 256). Sampling is counter-based: row
// r of the batch at step s is a pure function of (seed, s, r), so any rank can
// compute any shard of a global batch and the result never depends on how the
// rows are split. Evaluation windows are deterministic and non-overlapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

// Where Debian's `fortunes` packages install their files.
inline const std::string kDefaultFortunesDir = "/usr/share/games/fortunes";

class TextCorpus {
 public:
  // The plain fortune files of Debian's `fortunes` / `fortunes-min` packages:
  // every regular file directly in `dir` (not subdirectories, not symlinks
  // such as *.u8, not the *.dat index files), in sorted name order. Fortunes
  // are separated by lines consisting of `%`; fortune k (counted across all
  // files in order, empty ones skipped) goes to val if k % 10 == 9, else to
  // train, each followed by a "\n" separator. Throws if there are fewer
  // than 10: for the default directory, naming the package to install; for
  // another, saying what was found there and the format expected.
  static TextCorpus load_fortunes(const std::string& dir = kDefaultFortunesDir);

  // The whole file as `val` (train stays empty), for evaluating on arbitrary
  // text. Throws if the file is missing, unreadable or empty.
  static TextCorpus from_file(const std::string& path);

  std::vector<uint8_t> train;
  std::vector<uint8_t> val;
  std::vector<std::string> sources;  // The files read, in order.
};

// The error for a missing default fortunes corpus in `dir` (`why`: what is
// wrong), which names the package to install.
std::string fortunes_missing_message(const std::string& dir, const std::string& why);

// Entropy of the byte histogram of `bytes`, in nats (0 for an empty vector).
double unigram_entropy_nats(const std::vector<uint8_t>& bytes);

// Rows [row_begin, row_end) of the training batch at `step`. Row r starts at
// PhiloxStream(seed, "text_batch").below(data.size() - context, step, r);
// tokens = data[start, start+context), targets = data[start+1, start+context+1),
// written at offset (r - row_begin) * context of `tokens` / `targets`.
// Throws if data.size() <= context or the row range / context is invalid.
void sample_text_batch(const std::vector<uint8_t>& data, uint64_t seed, int64_t step,
                       int64_t row_begin, int64_t row_end, int64_t context, int32_t* tokens,
                       int32_t* targets);

// Number of evaluation windows of `context` bytes in `size` bytes. Window w
// covers tokens [w*context, (w+1)*context) and needs one more byte for its
// last target, so this is (size - 1) / context; the final partial window is
// dropped (up to `context` trailing bytes are never evaluated).
int64_t count_eval_windows(int64_t size, int64_t context);

// Window `window` (0 <= window < count_eval_windows): tokens =
// data[w*context, (w+1)*context), targets shifted by one byte. Writes
// `context` values to each of `tokens` and `targets`.
void eval_text_window(const std::vector<uint8_t>& data, int64_t window, int64_t context,
                      int32_t* tokens, int32_t* targets);

}  // namespace tessel
