// The standby job's go file (apps/tessel/standby.h) is a file the launcher
// writes and every rank of a standby job reads: the reader accepts exactly
// the texts go_file_text writes and refuses everything else with an error
// naming the file, without crashing, on hand-made and mutated inputs.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "../../apps/tessel/standby.h"
#include "common/test_dir.h"
#include "tessel/base/error.h"

namespace {

using tessel::cli::go_file_text;
using tessel::cli::kMaxGoFileBytes;
using tessel::cli::parse_go_file;

const std::string kFile = "/run/out/.standby-go";

// The parse error's message, or "" if `text` parses.
std::string parse_error(const std::string& text) {
  try {
    parse_go_file(kFile, text);
    return "";
  } catch (const tessel::Error& e) {
    return e.what();
  }
}

TEST(StandbyGoFile, RoundTripsGoAndQuit) {
  for (const std::string dir : {"", "/runs/x/checkpoints/step-40", "dir with spaces/ü"}) {
    const std::optional<std::string> back = parse_go_file(kFile, go_file_text(dir));
    ASSERT_TRUE(back.has_value()) << dir;
    EXPECT_EQ(*back, dir);
  }
  EXPECT_EQ(go_file_text(std::nullopt), "quit\n");
  EXPECT_FALSE(parse_go_file(kFile, "quit\n").has_value());
}

TEST(StandbyGoFile, RefusesMalformedTextsNamingTheFile) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expected a line 'go' or 'quit'"},
      {"go", "expected a line 'go' or 'quit'"},
      {"go\n", "newline"},
      {"go\n/ckpt", "newline"},
      {"go\n/ckpt\nextra\n", "more than the two lines"},
      {"quit", "expected a line 'go' or 'quit'"},
      {"quit\n\n", "expected a line 'go' or 'quit'"},
      {"stop\n", "starts with 'stop'"},
      {std::string("go\n/a\0b\n", 7), "NUL byte"},
      {"go\n" + std::string(kMaxGoFileBytes, 'a') + "\n", "more than a go file's"},
  };
  for (const auto& [text, what] : cases) {
    const std::string message = parse_error(text);
    EXPECT_NE(message.find(kFile), std::string::npos) << "text: '" << text << "'";
    EXPECT_NE(message.find(what), std::string::npos) << "text: '" << text << "': " << message;
  }
}

TEST(StandbyGoFile, WriterRefusesADirectoryItCannotCarry) {
  EXPECT_THROW(go_file_text(std::string("a\nb")), tessel::Error);
  EXPECT_THROW(go_file_text(std::string("a\0b", 3)), tessel::Error);
}

// Mutations of valid go files (byte flips, truncations, insertions,
// deletions, duplications): each either parses to a result whose own text
// is the input (the reader accepts nothing the writer would not write) or
// throws a tessel::Error naming the file.
TEST(StandbyGoFile, MutationFuzzAcceptsOnlyWhatTheWriterWrites) {
  const std::vector<std::string> seeds = {go_file_text(""), go_file_text("/runs/a/checkpoint"),
                                          go_file_text(std::nullopt)};
  std::mt19937 rng(20261201);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string text = seeds[i % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = text.empty() ? 0 : rng() % (text.size() + 1);
      switch (rng() % 5) {
        case 0:  // flip a byte
          if (at < text.size()) text[at] = static_cast<char>(rng() % 256);
          break;
        case 1:  // truncate
          text.resize(at);
          break;
        case 2:  // insert a byte ('\n', '\0' and letters are likely)
          text.insert(at, 1, "\n\0gqo/"[rng() % 6]);
          break;
        case 3:  // delete a byte
          if (at < text.size()) text.erase(at, 1);
          break;
        default:  // duplicate the tail
          text += text.substr(at);
          break;
      }
    }
    try {
      const std::optional<std::string> order = parse_go_file(kFile, text);
      EXPECT_EQ(go_file_text(order), text) << "accepted a text the writer would not write";
      ++accepted;
    } catch (const tessel::Error& e) {
      EXPECT_NE(std::string(e.what()).find(kFile), std::string::npos) << e.what();
      ++refused;
    }
  }
  // Both outcomes occur, so the fuzz exercises the accepting and refusing paths.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
}

TEST(StandbyGoFile, WaitForGoReadsTheFileAndRefusesAnOversizedOne) {
  const std::filesystem::path dir = tessel::test_dir("standby_go_file");
  const std::string go = (dir / "go").string();
  tessel::cli::write_go(go, "/ckpt/step-5");
  EXPECT_EQ(tessel::cli::wait_for_go(go), std::optional<std::string>("/ckpt/step-5"));
  tessel::cli::write_quit(go);
  EXPECT_FALSE(tessel::cli::wait_for_go(go).has_value());
  std::ofstream(go, std::ios::trunc) << std::string(kMaxGoFileBytes + 1, 'x');
  try {
    tessel::cli::wait_for_go(go);
    ADD_FAILURE() << "an oversized go file was read";
  } catch (const tessel::Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than a go file's"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
