#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "tessel/base/steady_clock.h"

namespace tessel::cli {

std::string format_duration(double seconds) {
  char buf[32];
  int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, s / 60 % 60);
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ds", s);
  return buf;
}

Progress::Progress(int64_t total_steps, const char* item_name)
    : total_(total_steps),
      item_name_(item_name),
      tty_(isatty(STDERR_FILENO)),
      every_(std::max<int64_t>(1, total_steps / 20)),
      start_(std::chrono::steady_clock::now()) {}

void Progress::update(int64_t done, double loss, double items_per_s, double gflops,
                      double val_loss) {
  if (!tty_ && done % every_ != 0 && done != total_ && val_loss < 0) return;
  double elapsed = seconds_since(start_);
  double eta = done > 0 ? elapsed / done * (total_ - done) : 0;
  constexpr int kWidth = 24;
  int filled = static_cast<int>(kWidth * done / std::max<int64_t>(1, total_));
  std::string bar(filled, '=');
  if (filled < kWidth) bar += '>' + std::string(kWidth - filled - 1, ' ');
  char val[32] = "";
  if (val_loss >= 0) std::snprintf(val, sizeof val, " val %.4f |", val_loss);
  std::fprintf(stderr, "%s%5lld/%lld [%s] loss %.4f |%s %.0f %s/s | %.1f GFLOP/s | ETA %s%s",
               tty_ ? "\r" : "", static_cast<long long>(done), static_cast<long long>(total_),
               bar.c_str(), loss, val, items_per_s, item_name_.c_str(), gflops,
               format_duration(eta).c_str(), tty_ ? "   " : "\n");
  std::fflush(stderr);
}

void Progress::finish() {
  if (tty_) std::fprintf(stderr, "\n");
}

}  // namespace tessel::cli
