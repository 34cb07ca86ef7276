// The periodic checkpoints of `tessel train` (checkpoint_every): each saves
// OUT/checkpoints/step-N/ and then publishes it (checkpoint_dirs.h).
//
// A synchronous save (async_save false) writes on the training thread. An
// asynchronous one copies into a host snapshot whose world sum runs during
// the next step (checkpoint.h); finish() completes it and starts rank 0's
// background write (background_writer.h), which runs while training goes on.
// Every rank calls the same methods after the same steps. Not copyable: the
// write in flight reads the snapshot it owns.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tessel/train/checkpoint/background_writer.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/trainer.h"

namespace tessel::cli {

class PeriodicSaver {
 public:
  PeriodicSaver(Trainer& trainer, const TrainConfig& config, std::string out);
  PeriodicSaver(const PeriodicSaver&) = delete;
  PeriodicSaver& operator=(const PeriodicSaver&) = delete;

  // Before the first step (after any resume): allocates the asynchronous
  // snapshot's host buffers where the memory plan counts them
  // (holds_save_snapshot), so that the first save only copies.
  void prepare();
  // Saves the checkpoint after `steps_done` steps.
  void save(int64_t steps_done);
  // The milliseconds the last save waited for the previous write (async).
  double wait_ms() const { return wait_ms_; }
  // Whether a snapshot waits for finish().
  bool finishing() const { return static_cast<bool>(start_write_); }
  // Completes the pending snapshot and starts rank 0's write; returns the
  // milliseconds waited (0 when none was pending).
  double finish();
  // Rank 0: blocks until the last write is done (rethrowing its error).
  void wait_for_writes();

 private:
  Trainer& trainer_;
  const TrainConfig& config_;
  const std::string out_;
  const bool root_;
  CheckpointSnapshot snapshot_;  // rank 0 keeps the bytes
  BackgroundWriter writer_;
  double wait_ms_ = 0;
  std::function<void()> start_write_;  // set while a snapshot is pending
};

}  // namespace tessel::cli
