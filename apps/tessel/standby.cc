#include "standby.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

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

}  // namespace

std::optional<std::string> wait_for_go(const std::string& go_file) {
  const timespec poll{0, 5'000'000};
  for (int i = 0;; ++i) {
    std::error_code ec;
    if (std::filesystem::exists(go_file, ec)) break;
    if (stop_signal() != 0) std::exit(128 + stop_signal());
    if (i % 200 == 0 && launcher_gone()) return std::nullopt;  // checked once a second
    nanosleep(&poll, nullptr);
  }
  std::ifstream in(go_file);
  std::string word, dir;
  std::getline(in, word);
  if (word == "quit") return std::nullopt;
  if (word != "go")
    TS_THROW("standby go file '", go_file, "' holds '", word, "', expected 'go' or 'quit'");
  std::getline(in, dir);
  return dir;
}

void write_go(const std::string& go_file, const std::string& resume_dir) {
  write_file_atomically(go_file, "go\n" + resume_dir + "\n");
}

void write_quit(const std::string& go_file) { write_file_atomically(go_file, "quit\n"); }

}  // namespace tessel::cli
