// The launcher's lost-rank markers (apps/tessel/elastic.h): only a marker
// that names a rank of the job shrinks it; every marker is consumed, so a
// stray one cannot shrink a later attempt.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../../apps/tessel/elastic.h"
#include "common/test_dir.h"

namespace {

using tessel::cli::LostRanks;
using tessel::cli::take_lost_ranks;

void touch(const std::filesystem::path& file) { std::ofstream(file) << "lost\n"; }

TEST(ElasticLostRanks, KeepsOnlyRanksOfTheJobAndConsumesEveryMarker) {
  const std::filesystem::path dir = tessel::test_dir("lost_ranks");
  for (const char* name : {"rank-3", "rank-1", "rank-01", "rank-4", "rank-17", "rank--1", "rank-x",
                           "rank-2junk", "rank-", "notes.txt"}) {
    touch(dir / name);
  }
  const LostRanks lost = take_lost_ranks(dir.string(), 4);
  EXPECT_EQ(lost.ranks, (std::vector<int>{1, 3}));  // rank-01 is rank 1 again
  EXPECT_EQ(lost.ignored, (std::vector<std::string>{"rank-", "rank--1", "rank-17", "rank-2junk",
                                                    "rank-4", "rank-x"}));
  // Every rank-* marker is gone; files that are not markers stay.
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    left.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(left, (std::vector<std::string>{"notes.txt"}));
  EXPECT_TRUE(take_lost_ranks(dir.string(), 4).ranks.empty());
  std::filesystem::remove_all(dir);
}

TEST(ElasticLostRanks, AMissingDirectoryDeclaresNothing) {
  const LostRanks lost = take_lost_ranks("/nonexistent/tessel/.lost", 4);
  EXPECT_TRUE(lost.ranks.empty());
  EXPECT_TRUE(lost.ignored.empty());
}

}  // namespace
