// Per-rank heartbeat: what each rank of a job is doing, readable by its peers
// without that rank's help.
//
// Each rank keeps one small file (TESSEL_HEARTBEAT_DIR, default /dev/shm,
// else /tmp; named by the job and rank) holding its state (running, blocked
// in a collective, in I/O), the label and sequence number of its latest
// blocking call, and a beat counter its watchdog thread advances every poll.
// A stopped or dead process stops beating. The comm watchdog reads its
// peers' files when a collective times out, to name the rank that did not
// arrive, and to postpone while a peer is in I/O (a slow checkpoint write is
// never a hang).
//
// Two modes:
// - kLocal (one host): the file is memory-mapped and updated with atomic
//   stores; times are CLOCK_MONOTONIC, shared by every process of a host,
//   so a reader computes ages from the writer's own timestamps.
// - kShared (a job across hosts, or forced with TESSEL_HEARTBEAT_SHARED=1):
//   the directory is one every host sees (a shared file system; `tessel
//   train` defaults it to OUT/.heartbeat for a job that spans hosts). The
//   rank updates its slot in memory and its watchdog thread writes the
//   whole slot to the file (pwrite) at every beat, so a blocking call costs
//   no system call. Clocks of different hosts are not compared: a reader
//   times a peer's beat counter and state by its own clock, from when it
//   first saw their current values, so it must read a peer at least twice,
//   a few polls apart, before calling it stopped (watchdog: observe()).
// Files of aborted jobs stay behind; create() removes those of this host
// whose owner pid is dead.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace tessel {

class Heartbeat {
 public:
  enum class State : int32_t { kRunning = 0, kBlocked = 1, kIo = 2 };

  enum class Mode { kLocal, kShared };

  // What one rank published; visible = false when its file cannot be read.
  struct View {
    bool visible = false;
    State state = State::kRunning;
    uint64_t seq = 0;        // blocking calls begun so far
    double state_age_s = 0;  // seconds in the current state
    double alive_age_s = 0;  // seconds since its watchdog last beat (kShared: since this
                             // reader first saw the current beat)
    std::string what;        // the latest blocking call (or the I/O) label
  };

  // Creates (truncating) this rank's file for job `job`; returns null if the
  // file cannot be created (then peers simply cannot see this rank).
  static std::unique_ptr<Heartbeat> create(const std::string& job, int rank,
                                           Mode mode = Mode::kLocal);
  Mode mode() const { return mode_; }
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
  // Not thread-safe in kShared mode (it keeps what it saw of each peer).
  View read(int rank) const;

  // Seconds on CLOCK_MONOTONIC.
  static double now_s();

  // The file's layout (heartbeat.cc).
  struct Slot;

 private:
  struct Seen {  // kShared: what this reader saw of a peer, and when (its own clock)
    uint64_t beats = 0;
    double beats_since = 0;
    uint64_t seq = 0;
    int32_t state = -1;
    double state_since = 0;
  };
  Heartbeat(std::string job, std::string path, Slot* slot, Mode mode, int fd);
  std::string job_;
  std::string path_;
  Slot* slot_;
  Mode mode_;
  int fd_ = -1;  // kShared: this rank's file, written at every beat
  int io_depth_ = 0;
  mutable std::map<int, Seen> seen_;
};

// The job's name for heartbeat files: PMIX_NAMESPACE / OMPI job id / "local".
std::string heartbeat_job_key();

// kShared when TESSEL_HEARTBEAT_SHARED=1 or the job spans hosts (Open MPI's
// local size below the world size), else kLocal.
Heartbeat::Mode heartbeat_mode(int world_size);

}  // namespace tessel
