// Token files: a written file reads back token for token; every defect
// (truncation, a damaged header, an index that disagrees with the data, an id
// past the vocabulary) is an Error naming the file; and a mutation fuzz test
// over a real file finds no crash and no error that fails to name it.
#include "tessel/train/data/token_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "common/error_of.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel_tokfile_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // Three documents over `vocab`.
  std::string write_sample(const std::string& name, int64_t vocab) {
    TokenFileWriter w(path(name), vocab, 77);
    w.add_document({1, 2, 3}, "a");
    w.add_document({static_cast<int32_t>(vocab - 1)}, "b");
    w.add_document({0, 5, 0, 5}, "c");
    w.finish();
    return path(name);
  }
  static std::string read_all(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  static void write_all(const std::string& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  }
  fs::path dir_;
};

TEST_F(TokenFileTest, RoundTripsUint16AndUint32) {
  for (int64_t vocab : {256, 65536, 65537, 200000}) {
    const std::string p = write_sample("rt" + std::to_string(vocab) + ".tok", vocab);
    const TokenFile f = TokenFile::open(p);
    EXPECT_EQ(f.bytes_per_token(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(f.vocab(), vocab);
    EXPECT_EQ(f.tokens(), 8);
    EXPECT_EQ(f.documents(), 3);
    EXPECT_EQ(f.tokenizer_hash(), 77u);
    EXPECT_EQ(f.document_begin(1), 3);
    EXPECT_EQ(f.document_end(1), 4);
    std::vector<int32_t> all(8);
    f.copy(0, 8, all.data());
    EXPECT_EQ(all, (std::vector<int32_t>{1, 2, 3, static_cast<int32_t>(vocab - 1), 0, 5, 0, 5}));
    EXPECT_NE(error_of([&] { f.copy(6, 3, all.data()); }).find("outside its 8 tokens"),
              std::string::npos);
  }
}

TEST_F(TokenFileTest, WriterRefusesBadDocumentsAndLeavesNoFile) {
  {
    TokenFileWriter w(path("bad.tok"), 10, 0);
    EXPECT_NE(error_of([&] {
                w.add_document({1, 10}, "notes.txt");
              }).find("notes.txt"),
              std::string::npos);
    EXPECT_NE(error_of([&] { w.add_document({}, "empty.txt"); }).find("empty"), std::string::npos);
  }  // never finished: nothing left behind
  EXPECT_FALSE(fs::exists(path("bad.tok")));
  EXPECT_FALSE(fs::exists(path("bad.tok.partial")));
}

TEST_F(TokenFileTest, EachDefectIsNamed) {
  const std::string good = read_all(write_sample("good.tok", 300));
  const std::string p = path("defect.tok");
  auto error_with = [&](std::string bytes) {
    write_all(p, bytes);
    const std::string e = error_of([&] { TokenFile::open(p); });
    EXPECT_NE(e.find(p), std::string::npos) << e;
    return e;
  };
  auto set_u64 = [](std::string bytes, size_t at, uint64_t v) {
    std::memcpy(bytes.data() + at, &v, 8);
    return bytes;
  };
  EXPECT_NE(error_with(good.substr(0, 10)).find("truncated"), std::string::npos);
  EXPECT_NE(error_with(good.substr(0, good.size() - 8)).find("truncated"), std::string::npos);
  EXPECT_NE(error_with(good + "x").find("past the end"), std::string::npos);
  EXPECT_NE(error_with("XXXXXXXX" + good.substr(8)).find("magic"), std::string::npos);
  std::string v2 = good;
  v2[8] = 2;
  EXPECT_NE(error_with(v2).find("version 2"), std::string::npos);
  std::string width4 = good;
  width4[12] = 4;
  EXPECT_NE(error_with(width4).find("bytes per token"), std::string::npos);
  // Tokens start at 64 (8 of 2 bytes, 16 bytes); the index at 80.
  EXPECT_NE(error_with(set_u64(good, 80, 5)).find("index disagrees"), std::string::npos);
  EXPECT_NE(error_with(set_u64(good, 96, 7)).find("covers 7 of its 8"), std::string::npos);
  std::string past = good;
  const uint16_t big = 300;
  std::memcpy(past.data() + 64 + 2, &big, 2);
  EXPECT_NE(error_with(past).find("id 300, past its vocabulary of 300"), std::string::npos);
  EXPECT_NE(error_with(set_u64(good, 24, 1ull << 60)).find("claims"), std::string::npos);
  EXPECT_NE(error_with(set_u64(good, 32, 0)).find("no documents"), std::string::npos);
  EXPECT_NE(error_of([&] { TokenFile::open(path("missing.tok")); }).find("missing.tok"),
            std::string::npos);
}

TEST_F(TokenFileTest, MutationFuzzNeverCrashesAndNamesTheFile) {
  TokenFileWriter w(path("fuzz_src.tok"), 70000, 5);  // uint32 ids
  std::mt19937_64 doc_rng(3);
  for (int d = 0; d < 20; ++d) {
    std::vector<int32_t> doc(1 + doc_rng() % 40);
    for (int32_t& t : doc) t = static_cast<int32_t>(doc_rng() % 70000);
    w.add_document(doc, "doc");
  }
  w.finish();
  const std::string good = read_all(path("fuzz_src.tok"));
  const std::string p = path("fuzz.tok");
  std::mt19937_64 rng(20261206);
  int rejected = 0;
  const int cases = 1000;
  for (int i = 0; i < cases; ++i) {
    std::string bad = good;
    const size_t n = bad.size();
    switch (rng() % 5) {
      case 0:  // header bytes
        for (int k = 0, m = 1 + static_cast<int>(rng() % 4); k < m; ++k)
          bad[rng() % kTokenFileHeaderBytes] = static_cast<char>(rng());
        break;
      case 1:  // a byte anywhere (a token, the index)
        bad[rng() % n] = static_cast<char>(rng());
        break;
      case 2:  // truncation
        bad.resize(rng() % n);
        break;
      case 3:  // a span deleted
        bad.erase(rng() % n, 1 + rng() % 16);
        break;
      default:  // bytes appended
        bad += std::string(1 + rng() % 9, static_cast<char>(rng()));
    }
    write_all(p, bad);
    try {
      const TokenFile f = TokenFile::open(p);
      // Accepted: every token readable and in range, the index consistent.
      std::vector<int32_t> all(f.tokens());
      f.copy(0, f.tokens(), all.data());
      for (int32_t t : all) ASSERT_TRUE(t >= 0 && t < f.vocab()) << "case " << i;
      ASSERT_EQ(f.document_end(f.documents() - 1), f.tokens()) << "case " << i;
    } catch (const Error& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "case " << i << ": " << e.what();
    }
  }
  EXPECT_GT(rejected, cases / 2) << "most mutations must be rejected";
}

}  // namespace
}  // namespace tessel
