// A one-line progress display for training: bar, ETA, loss, throughput.
// On a terminal the line is redrawn in place; otherwise a line is printed
// every `every` steps so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tessel::cli {

class Progress {
 public:
  Progress(int64_t total_steps, const char* item_name);
  void update(int64_t steps_done, double loss, double items_per_s, double gflops,
              double val_loss = -1);
  void finish();

 private:
  int64_t total_;
  std::string item_name_;
  bool tty_;
  int64_t every_;
  std::chrono::steady_clock::time_point start_;
};

std::string format_duration(double seconds);

}  // namespace tessel::cli
