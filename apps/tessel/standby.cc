#include "standby.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "stop_signal.h"
#include "tessel/base/error.h"
#include "tessel/train/checkpoint/safetensors.h"

namespace tessel::cli {
namespace {

bool launcher_gone() {
  const char* pid = std::getenv("TESSEL_LAUNCHER_PID");
  if (pid == nullptr || *pid == '\0') return false;
  const long p = std::strtol(pid, nullptr, 10);
  return p > 0 && ::kill(static_cast<pid_t>(p), 0) != 0 && errno == ESRCH;
}

constexpr std::string_view kGo = "go\n";
constexpr std::string_view kQuit = "quit\n";

// Reads the whole go file, refusing one larger than kMaxGoFileBytes before
// reading it.
std::string read_go_file(const std::string& go_file) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(go_file, ec);
  if (ec) TS_THROW("standby go file '", go_file, "': cannot read its size: ", ec.message());
  if (size > kMaxGoFileBytes)
    TS_THROW("standby go file '", go_file, "' holds ", size, " bytes, more than a go file's ",
             kMaxGoFileBytes);
  std::ifstream in(go_file, std::ios::binary);
  if (!in) TS_THROW("standby go file '", go_file, "': cannot open it");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) TS_THROW("standby go file '", go_file, "': read failed");
  return text;
}

}  // namespace

std::string go_file_text(const std::optional<std::string>& resume_dir) {
  if (!resume_dir) return std::string(kQuit);
  if (resume_dir->find_first_of(std::string_view("\n\0", 2)) != std::string::npos)
    TS_THROW("checkpoint directory '", *resume_dir, "' holds a newline or NUL byte, which a ",
             "standby go file cannot carry");
  return std::string(kGo) + *resume_dir + "\n";
}

std::optional<std::string> parse_go_file(const std::string& go_file, std::string_view text) {
  if (text.size() > kMaxGoFileBytes)
    TS_THROW("standby go file '", go_file, "' holds ", text.size(), " bytes, more than a go ",
             "file's ", kMaxGoFileBytes);
  if (text.find('\0') != std::string_view::npos)
    TS_THROW("standby go file '", go_file, "' holds a NUL byte");
  if (text == kQuit) return std::nullopt;
  if (text.substr(0, kGo.size()) != kGo) {
    const std::string_view first = text.substr(0, text.find('\n'));
    TS_THROW("standby go file '", go_file, "' starts with '", first,
             "', expected a line 'go' or 'quit'");
  }
  std::string_view dir = text.substr(kGo.size());
  if (dir.empty() || dir.back() != '\n')
    TS_THROW("standby go file '", go_file, "' does not end its checkpoint line with a newline");
  dir.remove_suffix(1);
  if (dir.find('\n') != std::string_view::npos)
    TS_THROW("standby go file '", go_file, "' holds more than the two lines 'go' and the ",
             "checkpoint directory");
  return std::string(dir);
}

std::optional<std::string> wait_for_go(const std::string& go_file) {
  const timespec poll{0, 5'000'000};
  for (int i = 0;; ++i) {
    std::error_code ec;
    if (std::filesystem::exists(go_file, ec)) break;
    if (stop_signal() != 0) std::exit(128 + stop_signal());
    if (i % 200 == 0 && launcher_gone()) return std::nullopt;  // checked once a second
    nanosleep(&poll, nullptr);
  }
  return parse_go_file(go_file, read_go_file(go_file));
}

std::string ready_file(const std::string& go_file) { return go_file + ".ready"; }

void write_ready(const std::string& go_file) {
  write_file_atomically(ready_file(go_file), "ready\n");
}

void write_go(const std::string& go_file, const std::string& resume_dir) {
  write_file_atomically(go_file, go_file_text(resume_dir));
}

void write_quit(const std::string& go_file) {
  write_file_atomically(go_file, go_file_text(std::nullopt));
}

}  // namespace tessel::cli
