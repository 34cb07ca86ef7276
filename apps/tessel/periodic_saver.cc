#include "periodic_saver.h"

#include <chrono>
#include <utility>

#include "tessel/base/steady_clock.h"
#include "tessel/compile/memory_report.h"
#include "tessel/train/checkpoint/checkpoint_dirs.h"
#include "tessel/train/fault_inject.h"

namespace tessel::cli {

PeriodicSaver::PeriodicSaver(Trainer& trainer, const TrainConfig& config, std::string out)
    : trainer_(trainer), config_(config), out_(std::move(out)), root_(trainer.is_root()) {}

void PeriodicSaver::prepare() {
  if (holds_save_snapshot(trainer_.config())) trainer_.reserve_snapshot(snapshot_);
}

double PeriodicSaver::finish() {
  if (!start_write_) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  snapshot_.finish();
  if (root_) start_write_();
  start_write_ = nullptr;
  return seconds_since(t0) * 1e3;
}

void PeriodicSaver::wait_for_writes() {
  if (root_) writer_.wait();
}

void PeriodicSaver::save(int64_t steps_done) {
  wait_ms_ = 0;
  const std::string dir = periodic_checkpoint_dir(out_, steps_done);
  const int keep = static_cast<int>(config_.keep_checkpoints);
  const int64_t step = steps_done - 1;  // TESSEL_FAULT_INJECT's step of this save
  if (!root_) fault_point(FaultPoint::kSave, step);
  if (!config_.async_save) {
    trainer_.save_checkpoint(dir);
    if (!root_) return;
    fault_point(FaultPoint::kSave, step);  // written, not yet published
    publish_periodic_checkpoint(out_, steps_done, keep);
    return;
  }
  const auto wait_start = std::chrono::steady_clock::now();
  if (root_) writer_.wait();  // the previous write still reads the buffers
  wait_ms_ = seconds_since(wait_start) * 1e3;
  trainer_.snapshot_checkpoint(snapshot_);
  // The write starts once the snapshot's sum is complete (finish).
  start_write_ = [this, dir, cfg = trainer_.config(), steps_done, keep, step] {
    writer_.start([this, dir, cfg, steps_done, keep, step] {
      save_checkpoint(dir, cfg, snapshot_.source(), steps_done, true);
      fault_point(FaultPoint::kSave, step);
      publish_periodic_checkpoint(out_, steps_done, keep);
    });
  };
  if (!snapshot_.pending()) finish();
}

}  // namespace tessel::cli
