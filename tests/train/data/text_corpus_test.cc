#include "tessel/train/data/text_corpus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "tessel/base/error.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

const char* kFortunesDir = "/usr/share/games/fortunes";

// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("tessel_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

TEST(DataFortunes, LoadsInstalledCorpus) {
  if (!fs::is_directory(kFortunesDir))
    GTEST_SKIP() << "package `fortunes` not installed (" << kFortunesDir << " absent)";
  TextCorpus corpus = TextCorpus::load_fortunes();
  ASSERT_FALSE(corpus.sources.empty());
  for (const std::string& source : corpus.sources) {
    EXPECT_FALSE(source.ends_with(".dat")) << source;
    EXPECT_FALSE(source.ends_with(".u8")) << source;
    EXPECT_EQ(source.find("/off/"), std::string::npos) << source;
  }
  EXPECT_TRUE(std::is_sorted(corpus.sources.begin(), corpus.sources.end()));
  ASSERT_FALSE(corpus.val.empty());
  const double total = static_cast<double>(corpus.train.size() + corpus.val.size());
  const double train_fraction = corpus.train.size() / total;
  EXPECT_GT(train_fraction, 0.87);
  EXPECT_LT(train_fraction, 0.93);
  // English prose with ASCII art mixed in measures about 3.2 nats per byte.
  const double h = unigram_entropy_nats(corpus.train);
  EXPECT_GT(h, 2.9);
  EXPECT_LT(h, 3.5);
  EXPECT_NEAR(unigram_entropy_nats(corpus.val), h, 0.1);
  // No fortune separator line survives.
  const std::string text(corpus.train.begin(), corpus.train.end());
  EXPECT_EQ(text.find("\n%\n"), std::string::npos);
}

TEST(DataFortunes, ParsesSeparatorsAndSkipsNonFortuneFiles) {
  TempDir dir("fortunes_parse");
  // File "a": fortunes 0..11; file "b": fortunes 12..13. Sorted order a, b.
  std::string a;
  for (int k = 0; k < 12; ++k) a += "fortune " + std::to_string(k) + "\nline two\n%\n";
  write_text(dir.file("b"), "fortune 12\n%\nfortune 13\n");  // No trailing separator.
  write_text(dir.file("a"), a + "%\n");                      // An empty fortune: skipped.
  write_text(dir.file("a.dat"), "binary index");
  fs::create_symlink("a", dir.file("a.u8"));
  fs::create_directory(dir.file("off"));
  write_text(dir.file("off/rude"), "offensive\n%\n");

  TextCorpus corpus = TextCorpus::load_fortunes(dir.path());
  EXPECT_EQ(corpus.sources, (std::vector<std::string>{dir.file("a"), dir.file("b")}));
  std::string train, val;
  for (int k = 0; k < 14; ++k) {
    std::string body = "fortune " + std::to_string(k) + "\n" + (k < 12 ? "line two\n" : "") + "\n";
    (k % 10 == 9 ? val : train) += body;
  }
  EXPECT_EQ(std::string(corpus.train.begin(), corpus.train.end()), train);
  EXPECT_EQ(std::string(corpus.val.begin(), corpus.val.end()), val);
}

// The user's own data_dir: the error says what was found there and the
// format expected; only the default directory's absence names the package.
TEST(DataFortunes, UserDirectoryErrorsSayWhatWasFoundAndTheFormat) {
  TempDir dir("fortunes_user");
  write_text(dir.file("x.dat"), "index only");
  std::string msg = error_of([&] { TextCorpus::load_fortunes(dir.path()); });
  EXPECT_EQ(msg.find("apt-get"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no fortune files in '" + dir.path() + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x.dat"), std::string::npos) << msg;  // skipped, and said so
  EXPECT_NE(msg.find("lines holding only `%`"), std::string::npos) << msg;

  write_text(dir.file("notes.txt"), "plain text\nwith no separators\n");
  msg = error_of([&] { TextCorpus::load_fortunes(dir.path()); });
  EXPECT_EQ(msg.find("apt-get"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 entry in 1 file (notes.txt)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at least 10"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lines holding only `%`"), std::string::npos) << msg;

  msg = error_of([&] { TextCorpus::load_fortunes(dir.file("notes.txt")); });
  EXPECT_NE(msg.find("'" + dir.file("notes.txt") + "' is a file, not a directory"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("apt-get"), std::string::npos) << msg;

  msg = error_of([&] { TextCorpus::load_fortunes(dir.file("nonexistent")); });
  EXPECT_NE(msg.find("'" + dir.file("nonexistent") + "' does not exist"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("apt-get"), std::string::npos) << msg;
}

TEST(DataFortunes, MissingDefaultCorpusNamesThePackage) {
  const std::string msg = fortunes_missing_message(kFortunesDir, "directory does not exist");
  EXPECT_NE(msg.find("apt-get install fortunes"), std::string::npos) << msg;
  EXPECT_NE(msg.find(kFortunesDir), std::string::npos) << msg;
}

TEST(DataText, UnigramEntropy) {
  EXPECT_DOUBLE_EQ(unigram_entropy_nats({}), 0.0);
  EXPECT_DOUBLE_EQ(unigram_entropy_nats(bytes_of("aaaa")), 0.0);
  EXPECT_NEAR(unigram_entropy_nats(bytes_of("abab")), std::log(2.0), 1e-12);
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  EXPECT_NEAR(unigram_entropy_nats(all), std::log(256.0), 1e-12);
}

TEST(DataText, FromFile) {
  TempDir dir("text_from_file");
  write_text(dir.file("t.txt"), "hello world\n");
  TextCorpus corpus = TextCorpus::from_file(dir.file("t.txt"));
  EXPECT_EQ(corpus.val, bytes_of("hello world\n"));
  EXPECT_TRUE(corpus.train.empty());
  EXPECT_EQ(corpus.sources, std::vector<std::string>{dir.file("t.txt")});

  std::string msg = error_of([&] { TextCorpus::from_file(dir.file("missing.txt")); });
  EXPECT_NE(msg.find(dir.file("missing.txt")), std::string::npos) << msg;
  write_text(dir.file("empty.txt"), "");
  msg = error_of([&] { TextCorpus::from_file(dir.file("empty.txt")); });
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file("empty.txt")), std::string::npos) << msg;
}

std::vector<uint8_t> synthetic_text(size_t n) {
  std::vector<uint8_t> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>((i * 7 + i / 13) % 251);
  return data;
}

TEST(DataText, SamplingIsDeterministicAndShardConsistent) {
  const std::vector<uint8_t> data = synthetic_text(5000);
  const int64_t context = 32, rows = 8;
  std::vector<int32_t> tok(rows * context), tgt(rows * context);
  sample_text_batch(data, 42, 7, 0, rows, context, tok.data(), tgt.data());

  std::vector<int32_t> tok2(rows * context), tgt2(rows * context);
  sample_text_batch(data, 42, 7, 0, 4, context, tok2.data(), tgt2.data());
  sample_text_batch(data, 42, 7, 4, 8, context, tok2.data() + 4 * context,
                    tgt2.data() + 4 * context);
  EXPECT_EQ(tok, tok2);
  EXPECT_EQ(tgt, tgt2);

  // Each row is a contiguous window and targets are tokens shifted by one.
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* t = tok.data() + r * context;
    const int32_t* y = tgt.data() + r * context;
    for (int64_t i = 0; i + 1 < context; ++i) EXPECT_EQ(y[i], t[i + 1]);
    bool found = false;
    for (size_t s = 0; s + context < data.size() && !found; ++s) {
      found = std::equal(t, t + context, data.begin() + s) && y[context - 1] == data[s + context];
    }
    EXPECT_TRUE(found) << "row " << r;
  }

  // Another step or seed gives another batch.
  sample_text_batch(data, 42, 8, 0, rows, context, tok2.data(), tgt2.data());
  EXPECT_NE(tok, tok2);
  sample_text_batch(data, 43, 7, 0, rows, context, tok2.data(), tgt2.data());
  EXPECT_NE(tok, tok2);
}

TEST(DataText, SamplingCoversTheLastWindow) {
  // With size == context + 1 there is exactly one window; it must be used.
  const std::vector<uint8_t> data = bytes_of("abcde");
  std::vector<int32_t> tok(4), tgt(4);
  sample_text_batch(data, 1, 0, 0, 1, 4, tok.data(), tgt.data());
  EXPECT_EQ(tok, (std::vector<int32_t>{'a', 'b', 'c', 'd'}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{'b', 'c', 'd', 'e'}));
}

TEST(DataText, SamplingRejectsShortText) {
  const std::vector<uint8_t> data = bytes_of("abcd");
  std::vector<int32_t> tok(4), tgt(4);
  std::string msg =
      error_of([&] { sample_text_batch(data, 1, 0, 0, 1, 4, tok.data(), tgt.data()); });
  EXPECT_NE(msg.find("4 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("context 4"), std::string::npos) << msg;
}

TEST(DataText, EvalWindowsTileTheText) {
  EXPECT_EQ(count_eval_windows(0, 4), 0);
  EXPECT_EQ(count_eval_windows(4, 4), 0);
  EXPECT_EQ(count_eval_windows(5, 4), 1);
  EXPECT_EQ(count_eval_windows(12, 4), 2);
  EXPECT_EQ(count_eval_windows(13, 4), 3);
  const std::vector<uint8_t> data = bytes_of("0123456789abc");
  std::vector<int32_t> tok(4), tgt(4);
  eval_text_window(data, 2, 4, tok.data(), tgt.data());
  EXPECT_EQ(tok, (std::vector<int32_t>{'8', '9', 'a', 'b'}));
  EXPECT_EQ(tgt, (std::vector<int32_t>{'9', 'a', 'b', 'c'}));
  std::string msg = error_of([&] { eval_text_window(data, 3, 4, tok.data(), tgt.data()); });
  EXPECT_NE(msg.find("window 3"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tessel
