// The MPI watchdog: a thread that stops the job when one blocking call
// outlasts TESSEL_COMM_TIMEOUT_S, after naming the peers that did not arrive
// (read from their heartbeats). Calls in I/O on a peer are not hangs.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "tessel/base/error.h"
#include "tessel/comm/heartbeat.h"
#include "tessel/comm/mpi/mpi_calls.h"
#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel {

using mpi_detail::kDefaultTimeoutS;

namespace {

constexpr int kWatchdogExitCode = 124;
// A peer whose watchdog has not refreshed its heartbeat for this long is
// stopped or dead (the refresh runs every half second at most): 5 s, or half
// the timeout when that is shorter (at least 1 s).
double not_responding_s(double timeout_s) { return std::clamp(timeout_s / 2, 1.0, 5.0); }
// At most this many peers are described when the watchdog fires.
constexpr int kMaxPeersReported = 32;

}  // namespace

struct MpiRuntime::Watchdog {
  std::mutex mu;
  std::condition_variable wake;
  bool stop = false;
  bool active = false;
  std::chrono::steady_clock::time_point since;
  std::string what;
  std::unique_ptr<Heartbeat> heartbeat;  // null if the file could not be made
  std::thread thread;
};

MpiRuntime::MpiRuntime() = default;
MpiRuntime::~MpiRuntime() { stop_watchdog(); }

void MpiRuntime::begin_blocking(const char* collective, const std::string& group,
                                const std::string& op, int64_t n) {
  if (!watchdog_) return;
  std::lock_guard<std::mutex> lock(watchdog_->mu);
  watchdog_->active = true;
  watchdog_->since = std::chrono::steady_clock::now();
  watchdog_->what =
      str_cat(collective, " on group '", group, "' (op '", op, "', ", n, " elements)");
  if (watchdog_->heartbeat) watchdog_->heartbeat->begin_blocking(watchdog_->what);
}

void MpiRuntime::end_blocking() {
  if (!watchdog_) return;
  std::lock_guard<std::mutex> lock(watchdog_->mu);
  watchdog_->active = false;
  if (watchdog_->heartbeat) watchdog_->heartbeat->end_blocking();
}

void MpiRuntime::begin_io(const std::string& what) {
  if (!watchdog_) return;
  std::lock_guard<std::mutex> lock(watchdog_->mu);
  if (watchdog_->heartbeat) watchdog_->heartbeat->begin_io(what);
}

void MpiRuntime::end_io() {
  if (!watchdog_) return;
  std::lock_guard<std::mutex> lock(watchdog_->mu);
  if (watchdog_->heartbeat) watchdog_->heartbeat->end_io();
}

void MpiRuntime::start_watchdog() {
  watchdog_ = std::make_unique<Watchdog>();
  if (world_size_ > 1)
    watchdog_->heartbeat =
        Heartbeat::create(heartbeat_job_key(), world_rank_, heartbeat_mode(world_size_));
  watchdog_->thread = std::thread([this] { watchdog_loop(); });
}

void MpiRuntime::stop_watchdog() {
  if (!watchdog_) return;
  {
    std::lock_guard<std::mutex> lock(watchdog_->mu);
    watchdog_->stop = true;
  }
  watchdog_->wake.notify_all();
  if (watchdog_->thread.joinable()) watchdog_->thread.join();
  watchdog_.reset();
  timeout_s_ = 0;
}

namespace {

// One line per peer for the watchdog's report; `behind` collects the ranks
// that did not arrive (not responding, running, or blocked elsewhere).
std::string describe_peers(const Heartbeat& hb, int me, int world_size, const std::string& what,
                           double timeout_s, std::string& behind) {
  std::string lines;
  int described = 0;
  for (int r = 0; r < world_size; ++r) {
    if (r == me) continue;
    Heartbeat::View v = hb.read(r);
    std::string line;
    bool late = false;
    if (!v.visible) {
      line = "no heartbeat visible (another host?)";
    } else if (v.alive_age_s > not_responding_s(timeout_s)) {
      late = true;
      // A shared heartbeat is written once a poll: a rank stopped before its
      // first write after a call has published none.
      line = str_cat(
          "NOT RESPONDING for ", static_cast<int>(v.alive_age_s), " s (stopped or dead); ",
          v.seq == 0 ? std::string("no call published yet")
                     : str_cat("last ", v.state == Heartbeat::State::kBlocked ? "in " : "after ",
                               "call #", v.seq, ": ", v.what));
    } else if (v.state == Heartbeat::State::kRunning) {
      late = true;
      line = str_cat("has not arrived: computing for ", static_cast<int>(v.state_age_s),
                     " s since its call #", v.seq, " (", v.what, ")");
    } else if (v.state == Heartbeat::State::kIo) {
      line = str_cat("in I/O for ", static_cast<int>(v.state_age_s), " s (", v.what, ")");
    } else if (v.what != what) {
      late = true;
      line = str_cat("blocked for ", static_cast<int>(v.state_age_s), " s in a different call #",
                     v.seq, ": ", v.what);
    } else {
      line = str_cat("waiting in the same call (#", v.seq, ") for ",
                     static_cast<int>(v.state_age_s), " s");
    }
    if (late) behind += (behind.empty() ? "" : ", ") + std::to_string(r);
    if (described++ < kMaxPeersReported) lines += str_cat("  rank ", r, ": ", line, "\n");
  }
  return lines;
}

// True when some peer's heartbeat says it is in I/O: waiting for it is no hang.
bool peer_in_io(const Heartbeat& hb, int me, int world_size, double timeout_s) {
  for (int r = 0; r < world_size; ++r) {
    if (r == me) continue;
    Heartbeat::View v = hb.read(r);
    if (v.visible && v.alive_age_s <= not_responding_s(timeout_s) &&
        v.state == Heartbeat::State::kIo)
      return true;
  }
  return false;
}

}  // namespace

void MpiRuntime::watchdog_loop() {
  using Clock = std::chrono::steady_clock;
  const auto timeout = std::chrono::duration<double>(timeout_s_);
  const auto poll = std::chrono::duration_cast<Clock::duration>(
      std::max(std::chrono::duration<double>(0.01),
               std::min(timeout / 4, std::chrono::duration<double>(0.5))));
  std::unique_lock<std::mutex> lock(watchdog_->mu);
  // Shared heartbeats (another host's clock is not compared): every peer is
  // read once when a call first times out, and judged only some polls later.
  bool observed = false;
  Clock::time_point observed_at;
  const auto observe_for = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(not_responding_s(timeout_s_)) + 2 * poll);
  while (!watchdog_->stop) {
    watchdog_->wake.wait_for(lock, poll);
    if (watchdog_->heartbeat) watchdog_->heartbeat->beat();
    if (watchdog_->stop || !watchdog_->active) continue;
    if (Clock::now() - watchdog_->since < timeout) continue;
    const Heartbeat* hb = watchdog_->heartbeat.get();
    if (hb && hb->mode() == Heartbeat::Mode::kShared) {
      if (!observed) {
        for (int r = 0; r < world_size_; ++r)
          if (r != world_rank_) hb->read(r);
        observed = true;
        observed_at = Clock::now();
        continue;
      }
      if (Clock::now() - observed_at < observe_for) continue;
    }
    if (hb && peer_in_io(*hb, world_rank_, world_size_, timeout_s_)) {
      watchdog_->since = Clock::now();  // a peer writing a checkpoint is no hang
      continue;
    }
    std::string behind;
    std::string peers =
        hb ? describe_peers(*hb, world_rank_, world_size_, watchdog_->what, timeout_s_, behind)
           : "";
    std::fprintf(stderr,
                 "tessel: rank %d: %s blocked for more than %g s (TESSEL_COMM_TIMEOUT_S, default "
                 "%g; 0 disables); aborting the job. %s\n%s",
                 world_rank_, watchdog_->what.c_str(), timeout_s_, kDefaultTimeoutS,
                 behind.empty()
                     ? "A hang usually means the ranks issued different collectives, or the "
                       "same ones in a different order."
                     : str_cat("Rank(s) that did not arrive: ", behind, ".").c_str(),
                 peers.c_str());
    std::fflush(stderr);
    // Under MPI_THREAD_FUNNELED only the main thread may call MPI; MPI_Abort is
    // the exception we rely on (Open MPI supports it), with _Exit as fallback.
    MPI_Abort(MPI_COMM_WORLD, kWatchdogExitCode);
    std::_Exit(kWatchdogExitCode);
  }
}

}  // namespace tessel
