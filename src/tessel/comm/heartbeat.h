// Per-rank heartbeat: what each rank of a job is doing, readable by its peers
// without that rank's help.
//
// Each rank maps one small file (TESSEL_HEARTBEAT_DIR, default /dev/shm, else
// /tmp; named by the job and rank) and stores into it, with plain atomic
// stores, its state (running, blocked in a collective, in I/O), the label and
// sequence number of its latest blocking call, when the state began, and an
// "alive" time its watchdog thread refreshes every poll. A stopped or dead
// process stops refreshing "alive". The comm watchdog reads its peers' files
// when a collective times out, to name the rank that did not arrive, and to
// postpone while a peer is in I/O (a slow checkpoint write is never a hang).
// Peers on another host have no visible file: they are reported as unknown.
// Times are CLOCK_MONOTONIC (shared by every process of one host). Files of
// aborted jobs stay behind; create() removes those whose owner pid is dead.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tessel {

class Heartbeat {
 public:
  enum class State : int32_t { kRunning = 0, kBlocked = 1, kIo = 2 };

  // What one rank published; visible = false when its file cannot be read.
  struct View {
    bool visible = false;
    State state = State::kRunning;
    uint64_t seq = 0;        // blocking calls begun so far
    double state_age_s = 0;  // seconds in the current state
    double alive_age_s = 0;  // seconds since its watchdog last refreshed "alive"
    std::string what;        // the latest blocking call (or the I/O) label
  };

  // Creates (truncating) this rank's file for job `job`; returns null if the
  // file cannot be created (then peers simply cannot see this rank).
  static std::unique_ptr<Heartbeat> create(const std::string& job, int rank);
  ~Heartbeat();  // unmaps and removes the file
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void begin_blocking(const std::string& what);
  void end_blocking();
  // I/O scopes nest and take precedence over blocking calls inside them.
  void begin_io(const std::string& what);
  void end_io();
  void beat();  // refresh "alive"

  // Reads rank `rank`'s file of the same job (this rank's own included).
  View read(int rank) const;

  // Seconds on CLOCK_MONOTONIC.
  static double now_s();

 private:
  struct Slot;
  Heartbeat(std::string job, std::string path, Slot* slot);
  std::string job_;
  std::string path_;
  Slot* slot_;
  int io_depth_ = 0;
};

// The job's name for heartbeat files: PMIX_NAMESPACE / OMPI job id / "local".
std::string heartbeat_job_key();

}  // namespace tessel
