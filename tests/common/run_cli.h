// run_cli(args): runs the tessel CLI built with the tests (TESSEL_CLI_PATH)
// with `args`, stdout and stderr together, and returns its exit code and
// output. `env` (e.g. "TESSEL_X=1") is prefixed to the command line.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace tessel {

struct CliResult {
  int exit_code;
  std::string output;
};

inline CliResult run_cli(const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + std::string(TESSEL_CLI_PATH) + " " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), pipe)) out.append(buf.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace tessel
