// One background thread that writes checkpoints, so that a periodic save
// stalls training only for the copy into host buffers.
//
// The caller takes a CheckpointSnapshot on the training thread (every
// collective stays there), then hands the writing rank's job to start(); the
// job reads only the snapshot, so it touches no communicator. One job runs
// at a time: start() and wait() first wait for the previous one, and
// rethrow its error (a failed write is reported at the next save or at the
// end, never lost).
#pragma once

#include <exception>
#include <functional>
#include <thread>
#include <utility>

namespace tessel {

class BackgroundWriter {
 public:
  BackgroundWriter() = default;
  ~BackgroundWriter();  // waits; an error still pending is dropped (wait() reports it)
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;

  void start(std::function<void()> job);
  // Blocks until the running job (if any) is done; rethrows its error.
  void wait();

 private:
  std::thread thread_;
  std::exception_ptr error_;
};

}  // namespace tessel
