// The sample order and the token dataset: each epoch is a permutation of the
// samples, a pure function of (seed, epoch, position); the validation split
// takes whole documents; windows read across document boundaries of a split.
#include "tessel/train/data/token_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "common/error_of.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

TEST(SampleOrder, EachEpochIsAPermutation) {
  for (uint64_t n : {1u, 2u, 3u, 5u, 16u, 17u, 1000u, 4097u}) {
    const SampleOrder order(7, "test", n);
    for (uint64_t epoch : {0u, 1u, 9u}) {
      std::vector<uint64_t> seen;
      for (uint64_t i = 0; i < n; ++i) seen.push_back(order.at(epoch, i));
      std::sort(seen.begin(), seen.end());
      std::vector<uint64_t> all(n);
      std::iota(all.begin(), all.end(), 0);
      EXPECT_EQ(seen, all) << "n " << n << " epoch " << epoch;
    }
  }
}

TEST(SampleOrder, ShufflesAndDependsOnlyOnSeedEpochAndPosition) {
  const SampleOrder a(7, "test", 1000), b(7, "test", 1000), other_seed(8, "test", 1000);
  int fixed = 0, same_as_next_epoch = 0, same_as_other_seed = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a.at(3, i), b.at(3, i));
    fixed += a.at(0, i) == i;
    same_as_next_epoch += a.at(0, i) == a.at(1, i);
    same_as_other_seed += a.at(0, i) == other_seed.at(0, i);
  }
  for (uint64_t i = 1000; i-- > 0;) EXPECT_EQ(a.at(2, i), b.at(2, i));  // any order: no state
  // A random permutation fixes about 1 of n points; allow a wide margin.
  EXPECT_LT(fixed, 20);
  EXPECT_LT(same_as_next_epoch, 20);
  EXPECT_LT(same_as_other_seed, 20);
  EXPECT_NE(error_of([&] { a.at(0, 1000); }).find("past its 1000"), std::string::npos);
}

class TokenDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("tessel_tokds_" + std::to_string(getpid()) + ".tok"))
                .string();
  }
  void TearDown() override { fs::remove(path_); }
  // `docs` documents of `len` tokens; document d holds d*100 + position.
  TokenFile write(int docs, int len) {
    TokenFileWriter w(path_, 100000, 0);
    for (int d = 0; d < docs; ++d) {
      std::vector<int32_t> doc(len);
      for (int i = 0; i < len; ++i) doc[i] = d * 100 + i;
      w.add_document(doc, "doc");
    }
    w.finish();
    return TokenFile::open(path_);
  }
  std::string path_;
};

TEST_F(TokenDatasetTest, SplitsByDocumentsAndWindowsCrossDocuments) {
  const TokenDataset data(write(20, 10), 4, 0.25, 1);
  EXPECT_EQ(data.val().documents(), 5);
  EXPECT_EQ(data.train().documents(), 15);
  EXPECT_EQ(data.train().size(), 150);
  EXPECT_EQ(data.train_samples(), (150 - 1) / 4);
  // No document is in both splits, and each split is whole documents.
  std::set<int32_t> train_docs, val_docs;
  std::vector<int32_t> t(150), v(50);
  data.train().copy(0, 150, t.data());
  data.val().copy(0, 50, v.data());
  for (int32_t x : t) train_docs.insert(x / 100);
  for (int32_t x : v) val_docs.insert(x / 100);
  EXPECT_EQ(train_docs.size(), 15u);
  EXPECT_EQ(val_docs.size(), 5u);
  for (int32_t d : val_docs) EXPECT_EQ(train_docs.count(d), 0u);
  // Window 2 covers stream tokens [8, 13): it crosses from the first
  // training document into the second; targets are shifted by one.
  std::vector<int32_t> tokens(4), targets(4);
  data.fill(data.train(), 2, tokens.data(), targets.data());
  EXPECT_EQ(tokens, (std::vector<int32_t>{t[8], t[9], t[10], t[11]}));
  EXPECT_EQ(targets, (std::vector<int32_t>{t[9], t[10], t[11], t[12]}));
  EXPECT_NE(t[9] / 100, t[10] / 100);
}

TEST_F(TokenDatasetTest, GlobalOrderCoversEveryWindowOncePerEpoch) {
  const TokenDataset data(write(30, 9), 4, 0.1, 5);
  const int64_t n = data.train_samples();
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> windows;
    for (int64_t g = epoch * n; g < (epoch + 1) * n; ++g) windows.insert(data.train_window(g));
    EXPECT_EQ(static_cast<int64_t>(windows.size()), n);
  }
}

TEST_F(TokenDatasetTest, TooLittleTextNamesTheFile) {
  EXPECT_NE(error_of([&] { TokenDataset(write(1, 50), 4, 0.1, 1); }).find("needs at least 2"),
            std::string::npos);
  const std::string e = error_of([&] { TokenDataset(write(4, 3), 4, 0.25, 1); });
  EXPECT_NE(e.find(path_), std::string::npos) << e;
  EXPECT_NE(e.find("needs 5"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessel
