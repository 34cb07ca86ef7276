// Tokenizers and bring-your-own-text: a SentencePiece BPE and unigram model
// trained on fortunes decodes its encoding back to the text; documents come
// from files, directories and separators, with errors naming the path; a
// checkpoint's tokenizer copy is checked against its manifest's hash, and a
// tokenizer that does not match the token file is refused before training.
#include "tessel/train/data/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "tessel/train/checkpoint/checkpoint_tokenizer.h"
#include "tessel/train/data/text_documents.h"
#include "tessel/train/data/token_file.h"
#include "tessel/train/task.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

class TokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("tessel_tokzr_" + std::to_string(getpid())));
    fs::create_directories(*dir_);
    docs_ = new std::vector<std::string>;
    for_each_document({"/usr/share/games/fortunes/computers"}, "%",
                      [](std::string_view text, const std::string&) { docs_->emplace_back(text); });
    train_tokenizer(*docs_, {400, "bpe"}, path("bpe.model"));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete docs_;
  }
  static std::string path(const std::string& name) { return (*dir_ / name).string(); }
  static void write(const std::string& name, const std::string& text) {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name), std::ios::binary) << text;
  }
  static fs::path* dir_;
  static std::vector<std::string>* docs_;
};
fs::path* TokenizerTest::dir_ = nullptr;
std::vector<std::string>* TokenizerTest::docs_ = nullptr;

TEST_F(TokenizerTest, BpeAndUnigramDecodeTheirEncodingBackToTheText) {
  ASSERT_GT(docs_->size(), 100u);
  train_tokenizer(*docs_, {400, "unigram"}, path("unigram.model"));
  for (const char* name : {"bpe.model", "unigram.model"}) {
    const Tokenizer t = Tokenizer::load(path(name));
    EXPECT_EQ(t.vocab(), 400);
    EXPECT_EQ(t.hash(), tokenizer_file_hash(path(name)));
    int64_t tokens = 0, bytes = 0;
    for (size_t d = 0; d < 50; ++d) {
      const std::string& doc = (*docs_)[d];
      const std::vector<int32_t> ids = t.encode(doc);
      EXPECT_EQ(t.decode(ids), doc) << name << " document " << d;
      tokens += static_cast<int64_t>(ids.size());
      bytes += static_cast<int64_t>(doc.size());
      const std::vector<int32_t> with_end = t.encode_document(doc);
      EXPECT_EQ(with_end.size(), ids.size() + 1);  // the end-of-document id
    }
    EXPECT_LT(tokens, bytes) << name << ": a subword model cuts fewer tokens than bytes";
  }
  // Bytes past ASCII and text never seen encode through byte fallback.
  const Tokenizer t = Tokenizer::load(path("bpe.model"));
  EXPECT_EQ(t.decode(t.encode("na\xc3\xafve \xe2\x82\xac 42")), "na\xc3\xafve \xe2\x82\xac 42");
  EXPECT_EQ(Tokenizer::byte_level().encode("\xff"
                                           "a"),
            (std::vector<int32_t>{255, 97}));
}

TEST_F(TokenizerTest, BadModelsAndOptionsAreNamed) {
  write("not_a_model", "hello");
  EXPECT_NE(error_of([] { Tokenizer::load(path("not_a_model")); }).find("not_a_model"),
            std::string::npos);
  EXPECT_NE(error_of([] { Tokenizer::load(path("missing.model")); }).find("missing.model"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              train_tokenizer(*docs_, {100, "bpe"}, path("x"));
            }).find("too small"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              train_tokenizer(*docs_, {400, "wordpiece"}, path("x"));
            }).find("bpe or unigram"),
            std::string::npos);
}

TEST_F(TokenizerTest, DocumentsFromFilesDirectoriesAndSeparators) {
  write("text/b.txt", "second file\n");
  write("text/a.txt", "one\n%\ntwo\r\n%\r\n\n%\nthree");
  write("text/sub/c.md", "nested\n\nparagraph\n");
  write("text/.hidden", "skipped");
  write("text/binary.dat", std::string("x\0y", 3));
  fs::create_symlink(path("text/b.txt"), path("text/link.txt"));
  std::vector<std::string> skipped;
  const std::vector<std::string> files = list_text_files({path("text")}, &skipped);
  EXPECT_EQ(files, (std::vector<std::string>{path("text/a.txt"), path("text/b.txt"),
                                             path("text/sub/c.md")}));
  EXPECT_EQ(skipped.size(), 2u);  // the binary file and the link
  std::vector<std::string> docs;
  auto collect = [&docs](std::string_view text, const std::string&) { docs.emplace_back(text); };
  EXPECT_EQ(for_each_document(files, std::nullopt, collect), 3);
  EXPECT_EQ(docs[1], "second file\n");
  docs.clear();
  EXPECT_EQ(for_each_document(files, "%", collect), 5);  // a.txt holds three, one blank dropped
  EXPECT_EQ(docs[0], "one\n");
  EXPECT_EQ(docs[1], "two\r\n");
  EXPECT_EQ(docs[2], "three");
  docs.clear();
  EXPECT_EQ(for_each_document({path("text/sub/c.md")}, "", collect), 2);  // blank lines
  EXPECT_NE(
      error_of([] { list_text_files({path("nope")}); }).find(path("nope") + "' does not exist"),
      std::string::npos);
  EXPECT_NE(error_of([] { list_text_files({path("text/binary.dat")}); }).find("binary"),
            std::string::npos);
  write("blank.txt", " \n\n");
  EXPECT_NE(error_of([&] {
              for_each_document({path("blank.txt")}, std::nullopt, collect);
            }).find("blank.txt"),
            std::string::npos);
}

TEST_F(TokenizerTest, CheckpointCopyIsHashCheckedAndTheTokenFileMustMatch) {
  TrainConfig c;
  c.tokenizer = path("bpe.model");
  const fs::path ckpt = *dir_ / "ckpt";
  fs::create_directories(ckpt);
  nlohmann::json manifest = {{"config", c.to_json()}};
  copy_tokenizer_into(ckpt, c, manifest);
  std::ofstream(ckpt / "manifest.json") << manifest.dump();
  EXPECT_EQ(checkpoint_tokenizer(ckpt.string()), (ckpt / "tokenizer.model").string());
  std::ofstream(ckpt / "tokenizer.model", std::ios::app) << "x";
  EXPECT_NE(error_of([&] { checkpoint_tokenizer(ckpt.string()); }).find("does not match"),
            std::string::npos);

  // A byte-level token file with a tokenizer configured, and the reverse.
  TokenFileWriter w(path("bytes.tok"), 256, 0);
  for (const std::string& d : *docs_) w.add_document(Tokenizer::byte_level().encode(d), "doc");
  w.finish();
  TrainConfig t;
  t.data = "tokens";
  t.token_file = path("bytes.tok");
  t.tokenizer = path("bpe.model");
  EXPECT_NE(error_of([&] { make_task(t); }).find("does not match token file"), std::string::npos);
  t.tokenizer.clear();
  t.vocab = 400;
  EXPECT_NE(error_of([&] { make_task(t); }).find("'vocab' is 400"), std::string::npos);
  t.vocab = 256;
  EXPECT_NE(make_task(t), nullptr);
}

}  // namespace
}  // namespace tessel
