#include "tessel/train/checkpoint/background_writer.h"

namespace tessel {

BackgroundWriter::~BackgroundWriter() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundWriter::start(std::function<void()> job) {
  wait();
  thread_ = std::thread([this, job = std::move(job)] {
    try {
      job();
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void BackgroundWriter::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace tessel
