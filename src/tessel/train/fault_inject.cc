#include "tessel/train/fault_inject.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"

namespace tessel {
namespace {

struct Armed {
  bool on = false;
  FaultPoint point = FaultPoint::kForward;
  int64_t step = 0;
  std::string lost_file;   // created before the kill with lose=1
  std::string after_file;  // waited for before the kill (after_file=PATH)
};
Armed armed;

FaultPoint parse_point(const std::string& text) {
  if (text == "forward") return FaultPoint::kForward;
  if (text == "backward") return FaultPoint::kBackward;
  if (text == "collective") return FaultPoint::kCollective;
  if (text == "optimizer") return FaultPoint::kOptimizer;
  if (text == "save") return FaultPoint::kSave;
  TS_THROW("TESSEL_FAULT_INJECT: unknown point '", text,
           "' (expected forward, backward, collective, optimizer or save)");
}

}  // namespace

void arm_fault_injection(int world_rank) {
  armed = Armed{};
  const char* spec = std::getenv("TESSEL_FAULT_INJECT");
  if (!spec || !*spec) return;
  int64_t rank = -1, step = -1, lose = 0;
  std::string point, after_file;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq),
                      value = eq == std::string::npos ? "" : item.substr(eq + 1);
    try {
      if (key == "rank")
        rank = std::stoll(value);
      else if (key == "step")
        step = std::stoll(value);
      else if (key == "point")
        point = value;
      else if (key == "lose")
        lose = std::stoll(value);
      else if (key == "after_file") {
        if (!after_file.empty())  // set once, never to ""
          TS_THROW("TESSEL_FAULT_INJECT: 'after_file' given twice in '", spec, "'");
        if (value.empty())
          TS_THROW("TESSEL_FAULT_INJECT: 'after_file' needs a path, got '", item, "' in '", spec,
                   "'");
        after_file = value;
      } else
        TS_THROW("TESSEL_FAULT_INJECT: unknown key '", key, "' in '", spec,
                 "' (expected rank=R,step=S,point=P[,lose=1][,after_file=PATH])");
    } catch (const std::logic_error&) {
      TS_THROW("TESSEL_FAULT_INJECT: '", key, "' needs an integer, got '", value, "'");
    }
  }
  if (rank < 0 || step < 0 || point.empty())
    TS_THROW("TESSEL_FAULT_INJECT='", spec, "' needs rank=R,step=S,point=P (R, S >= 0)");
  if (lose != 0 && lose != 1)
    TS_THROW("TESSEL_FAULT_INJECT: lose must be 0 or 1, got ", lose, " in '", spec, "'");
  const FaultPoint p = parse_point(point);
  std::string lost_file;
  if (lose == 1) {
    const char* dir = std::getenv("TESSEL_LOST_DIR");
    if (!dir || !*dir)
      TS_THROW("TESSEL_FAULT_INJECT: lose=1 declares the rank lost in $TESSEL_LOST_DIR, which is ",
               "not set (`tessel launch` sets it)");
    lost_file = (std::filesystem::path(dir) / ("rank-" + std::to_string(rank))).string();
  }
  const char* attempt = std::getenv("TESSEL_ATTEMPT");
  if (attempt && std::string(attempt) != "0") return;  // later attempts run clean
  if (rank != world_rank) return;
  armed = {true, p, step, lost_file, after_file};
}

bool fault_armed(FaultPoint point) { return armed.on && armed.point == point; }

const std::string& fault_after_file() { return armed.after_file; }

bool wait_for_file(const std::string& path, double timeout_s) {
  const timespec poll{0, 10'000'000};
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) return true;
    if (seconds_since(start) >= timeout_s) return false;
    nanosleep(&poll, nullptr);
  }
}

void fault_point(FaultPoint point, int64_t step) {
  if (!armed.on || armed.point != point || armed.step != step) return;
  if (!armed.after_file.empty()) {
    std::fprintf(stderr, "TESSEL_FAULT_INJECT: waiting for %s before the kill at step %lld\n",
                 armed.after_file.c_str(), static_cast<long long>(step));
    std::fflush(stderr);
    if (!wait_for_file(armed.after_file, kFaultAfterFileTimeoutS)) {
      // Not a throw: the save point runs on the checkpoint writer's thread.
      std::fprintf(stderr,
                   "TESSEL_FAULT_INJECT: after_file '%s' did not appear within %.0f s; this rank "
                   "fails (exit status 1) instead of the injected kill\n",
                   armed.after_file.c_str(), kFaultAfterFileTimeoutS);
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
  std::fprintf(stderr, "TESSEL_FAULT_INJECT: killing this rank (SIGKILL) at step %lld\n",
               static_cast<long long>(step));
  if (!armed.lost_file.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(armed.lost_file).parent_path(), ec);
    std::ofstream(armed.lost_file) << "lost\n";
    std::fprintf(stderr, "TESSEL_FAULT_INJECT: this rank is declared lost (%s)\n",
                 armed.lost_file.c_str());
  }
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
}

}  // namespace tessel
