#include "tessel/comm/mpi/mpi_runtime.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/base/heap_reuse.h"
#include "tessel/comm/heartbeat.h"
#include "tessel/comm/mpi/open_mpi_defaults.h"

namespace tessel {
namespace {

constexpr int kWatchdogExitCode = 124;
// The watchdog's default limit on one blocking call (TESSEL_COMM_TIMEOUT_S).
constexpr double kDefaultTimeoutS = 300;
// A peer whose watchdog has not refreshed its heartbeat for this long is
// stopped or dead (the refresh runs every half second at most): 5 s, or half
// the timeout when that is shorter (at least 1 s).
double not_responding_s(double timeout_s) { return std::clamp(timeout_s / 2, 1.0, 5.0); }
// At most this many peers are described when the watchdog fires.
constexpr int kMaxPeersReported = 32;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return str_cat("MPI error code ", code);
  return std::string(text, static_cast<size_t>(len));
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

// Throws a tessel::Error naming the call, group, op and element count.
void check_mpi(int code, const char* collective, const std::string& group, const std::string& op,
               int64_t n) {
  if (code == MPI_SUCCESS) return;
  TS_THROW("MPI ", collective, " failed on group '", group, "' (op '", op, "', ", n,
           " elements): ", mpi_error_string(code));
}

// Tells the watchdog that a blocking MPI call is in flight for its lifetime.
class WatchScope {
 public:
  WatchScope(const char* collective, const std::string& group, const std::string& op, int64_t n)
      : runtime_(MpiRuntime::instance()) {
    if (runtime_.watchdog_enabled()) runtime_.begin_blocking(collective, group, op, n);
  }
  ~WatchScope() {
    if (runtime_.watchdog_enabled()) runtime_.end_blocking();
  }
  WatchScope(const WatchScope&) = delete;
  WatchScope& operator=(const WatchScope&) = delete;

 private:
  MpiRuntime& runtime_;
};

// A non-blocking MPI operation (MPI_Iallreduce, MPI_Isend) in flight.
class MpiRequest : public CommRequest {
 public:
  MpiRequest(MPI_Request request, std::string group, std::string op, int64_t n,
             const char* what = "all_reduce")
      : request_(request), group_(std::move(group)), op_(std::move(op)), n_(n), what_(what) {}

  ~MpiRequest() override {
    if (done_ || mpi_finalized()) return;
    try {
      wait();
    } catch (const Error& e) {
      std::fprintf(stderr, "tessel: unfinished request destroyed: %s\n", e.what());
    }
  }

  void wait() override {
    if (done_) return;
    WatchScope watch(what_, group_, op_, n_);
    int code = MPI_Wait(&request_, MPI_STATUS_IGNORE);
    done_ = true;  // the request is gone whether or not it succeeded
    check_mpi(code, what_, group_, op_, n_);
  }

  bool test() override {
    if (done_) return true;
    int flag = 0;
    int code = MPI_Test(&request_, &flag, MPI_STATUS_IGNORE);
    if (code != MPI_SUCCESS) done_ = true;
    check_mpi(code, what_, group_, op_, n_);
    if (flag) done_ = true;
    return done_;
  }

 private:
  MPI_Request request_;
  std::string group_;
  std::string op_;
  int64_t n_;
  const char* what_;
  bool done_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------
// MpiRuntime

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

MpiRuntime& MpiRuntime::instance() {
  static MpiRuntime runtime;
  return runtime;
}

MpiRuntime::~MpiRuntime() { stop_watchdog(); }

bool MpiRuntime::launched_under_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

void MpiRuntime::init(int* argc, char*** argv) {
  if (initialized_) return;
  keep_freed_memory_for_reuse();  // MPI's per-call temporaries (base/heap_reuse.h)
  int already = 0;
  MPI_Initialized(&already);
  if (already) {
    if (mpi_finalized()) TS_THROW("MpiRuntime::init: MPI has already been finalized");
  } else {
    set_open_mpi_defaults();  // before MPI reads its parameters (open_mpi_defaults.h)
    int provided = 0;
    int code = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    if (code != MPI_SUCCESS) TS_THROW("MPI_Init_thread failed: ", mpi_error_string(code));
    we_started_ = true;
  }
  std::atexit(&MpiRuntime::finalize_at_exit);
  check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
            "world", "init", 0);
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank", "world", "init", 0);
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size", "world", "init", 0);
  initialized_ = true;

  timeout_s_ = kDefaultTimeoutS;
  if (const char* text = std::getenv("TESSEL_COMM_TIMEOUT_S"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    double seconds = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(seconds >= 0)) {
      TS_THROW("TESSEL_COMM_TIMEOUT_S='", text, "' is not a number of seconds >= 0");
    }
    timeout_s_ = seconds;
  }
  if (timeout_s_ > 0) start_watchdog();
}

void MpiRuntime::finalize_at_exit() {
  MpiRuntime& runtime = instance();
  runtime.stop_watchdog();
  if (runtime.we_started_ && !mpi_finalized()) MPI_Finalize();
  runtime.initialized_ = false;
}

void MpiRuntime::require_initialized(const char* what) const {
  if (!initialized_) TS_THROW("MpiRuntime::", what, " called before MpiRuntime::init()");
}

int MpiRuntime::world_rank() const {
  require_initialized("world_rank");
  return world_rank_;
}

int MpiRuntime::world_size() const {
  require_initialized("world_size");
  return world_size_;
}

std::unique_ptr<Communicator> MpiRuntime::world(const std::string& name) {
  require_initialized("world");
  MPI_Comm comm = MPI_COMM_NULL;
  {
    WatchScope watch("MPI_Comm_dup", name, "world", 0);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup", name, "world", 0);
  }
  return std::make_unique<MpiCommunicator>(comm, name);
}

std::unique_ptr<Communicator> MpiRuntime::split(const std::string& name, int color, int key) {
  require_initialized("split");
  if (color < 0) TS_THROW("MpiRuntime::split('", name, "'): color ", color, " must be >= 0");
  MPI_Comm comm = MPI_COMM_NULL;
  {
    WatchScope watch("MPI_Comm_split", name, "split", 0);
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm), "MPI_Comm_split", name, "split",
              0);
  }
  return std::make_unique<MpiCommunicator>(comm, name);
}

void MpiRuntime::abort(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (initialized_ && !mpi_finalized()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void MpiRuntime::barrier() {
  require_initialized("barrier");
  WatchScope watch("barrier", "world", "barrier", 0);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "barrier", "world", "barrier", 0);
}

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
      line = str_cat(
          "NOT RESPONDING for ", static_cast<int>(v.alive_age_s), " s (stopped or dead); last ",
          v.state == Heartbeat::State::kBlocked ? "in " : "after ", "call #", v.seq, ": ", v.what);
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

// ---------------------------------------------------------------------------
// MpiCommunicator

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name)
    : comm_(comm), name_(std::move(name)) {
  if (comm_ == MPI_COMM_NULL) TS_THROW("MpiCommunicator '", name_, "': MPI_COMM_NULL given");
  check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", name_,
            "create", 0);
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", name_, "create", 0);
  check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", name_, "create", 0);
}

MpiCommunicator::~MpiCommunicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (comm_ != MPI_COMM_NULL && initialized && !mpi_finalized()) MPI_Comm_free(&comm_);
}

int MpiCommunicator::checked_count(const char* collective, int64_t n, int64_t blocks,
                                   const std::string& op, const void* in, const void* out) const {
  if (n < 0) {
    TS_THROW(collective, " on group '", name_, "' (op '", op, "'): element count ", n,
             " is negative");
  }
  if (n > INT_MAX / blocks) {
    TS_THROW(collective, " on group '", name_, "' (op '", op, "'): ", n, " elements",
             (blocks > 1 ? str_cat(" x ", blocks, " ranks") : std::string()),
             " exceed MPI's int count limit ", INT_MAX, "; split the call into smaller pieces");
  }
  if (n > 0 && (in == nullptr || out == nullptr)) {
    TS_THROW(collective, " on group '", name_, "' (op '", op, "'): null buffer for ", n,
             " elements");
  }
  return static_cast<int>(n);
}

void MpiCommunicator::all_reduce(float* data, int64_t n, ReduceKind kind, const std::string& op) {
  int c = checked_count("all_reduce", n, 1, op, data, data);
  MPI_Op mpi_op = kind == ReduceKind::kSum ? MPI_SUM : MPI_MAX;
  {
    WatchScope watch("all_reduce", name_, op, n);
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, c, MPI_FLOAT, mpi_op, comm_), "all_reduce", name_,
              op, n);
  }
  count("all_reduce", n * 4);
}

std::unique_ptr<CommRequest> MpiCommunicator::start_all_reduce(float* data, int64_t n,
                                                               const std::string& op) {
  int c = checked_count("all_reduce", n, 1, op, data, data);
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, c, MPI_FLOAT, MPI_SUM, comm_, &request),
            "all_reduce (MPI_Iallreduce)", name_, op, n);
  count("all_reduce", n * 4);
  return std::make_unique<MpiRequest>(request, name_, op, n);
}

void MpiCommunicator::all_gather(const float* in, float* out, int64_t n, const std::string& op) {
  int c = checked_count("all_gather", n, size_, op, in, out);
  {
    WatchScope watch("all_gather", name_, op, n);
    check_mpi(MPI_Allgather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm_), "all_gather", name_, op,
              n);
  }
  count("all_gather", n * 4);
}

void MpiCommunicator::reduce_scatter(const float* in, float* out, int64_t n,
                                     const std::string& op) {
  int c = checked_count("reduce_scatter", n, size_, op, in, out);
  {
    WatchScope watch("reduce_scatter", name_, op, n);
    check_mpi(MPI_Reduce_scatter_block(in, out, c, MPI_FLOAT, MPI_SUM, comm_), "reduce_scatter",
              name_, op, n);
  }
  count("reduce_scatter", int64_t{size_} * n * 4);
}

void MpiCommunicator::all_to_all(const float* in, float* out, int64_t n, const std::string& op) {
  int c = checked_count("all_to_all", n, size_, op, in, out);
  {
    WatchScope watch("all_to_all", name_, op, n);
    check_mpi(MPI_Alltoall(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm_), "all_to_all", name_, op, n);
  }
  count("all_to_all", int64_t{size_} * n * 4);
}

void MpiCommunicator::all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                                      const std::string& op) {
  int c = checked_count("all_gather", n, size_, op, in, out);
  {
    WatchScope watch("all_gather", name_, op, n);
    check_mpi(MPI_Allgather(in, c, MPI_UINT16_T, out, c, MPI_UINT16_T, comm_), "all_gather", name_,
              op, n);
  }
  count("all_gather", n * 2);
}

void MpiCommunicator::all_reduce_bf16(float* data, int64_t n, void* work, const std::string& op) {
  checked_count("all_reduce", n, 2, op, data, work);
  const int p = size_;
  uint16_t* values = static_cast<uint16_t*>(work);  // n: the rounded values, then the sums
  const int64_t mine = chunk_begin(n, p, rank_ + 1) - chunk_begin(n, p, rank_);
  uint16_t* chunks = values + n;  // p * mine: every rank's values of my chunk
  std::vector<int> send_counts(p), send_displs(p), recv_counts(p), recv_displs(p);
  for (int r = 0; r < p; ++r) {
    send_displs[r] = static_cast<int>(chunk_begin(n, p, r));
    send_counts[r] = static_cast<int>(chunk_begin(n, p, r + 1)) - send_displs[r];
    recv_counts[r] = static_cast<int>(mine);
    recv_displs[r] = static_cast<int>(r * mine);
  }
  round_to_bf16(data, values, n);
  {
    WatchScope watch("all_reduce", name_, op, n);
    check_mpi(MPI_Alltoallv(values, send_counts.data(), send_displs.data(), MPI_UINT16_T, chunks,
                            recv_counts.data(), recv_displs.data(), MPI_UINT16_T, comm_),
              "all_reduce (bf16: MPI_Alltoallv)", name_, op, n);
  }
  uint16_t* sums = values + send_displs[rank_];
#pragma omp parallel for schedule(static) if (mine >= (1 << 15))
  for (int64_t i = 0; i < mine; ++i) {
    float acc = 0.0f;
    for (int r = 0; r < p; ++r) acc += bf16_bits_to_f32(chunks[r * mine + i]);
    sums[i] = f32_to_bf16_bits(acc);
  }
  {
    WatchScope watch("all_reduce", name_, op, n);
    check_mpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, send_counts.data(),
                             send_displs.data(), MPI_UINT16_T, comm_),
              "all_reduce (bf16: MPI_Allgatherv)", name_, op, n);
  }
  widen_bf16(values, data, n);
  count("all_reduce", n * 2);
}

void MpiCommunicator::reduce_scatter_bf16(const float* in, float* out, int64_t n, void* work,
                                          const std::string& op) {
  int c = checked_count("reduce_scatter", n, size_, op, in, out);
  if (n > 0 && work == nullptr)
    TS_THROW("reduce_scatter on group '", name_, "' (op '", op, "'): null work buffer");
  const int p = size_;
  uint16_t* values = static_cast<uint16_t*>(work);  // p * n: my rounded values, rank-major
  uint16_t* blocks = values + int64_t{p} * n;       // p * n: every rank's values of my block
  round_to_bf16(in, values, int64_t{p} * n);
  {
    WatchScope watch("reduce_scatter", name_, op, n);
    check_mpi(MPI_Alltoall(values, c, MPI_UINT16_T, blocks, c, MPI_UINT16_T, comm_),
              "reduce_scatter (bf16: MPI_Alltoall)", name_, op, n);
  }
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int r = 0; r < p; ++r) acc += bf16_bits_to_f32(blocks[r * n + i]);
    out[i] = acc;
  }
  count("reduce_scatter", int64_t{p} * n * 2);
}

}  // namespace tessel

namespace tessel {

std::unique_ptr<CommRequest> MpiCommunicator::start_send(const float* data, int64_t n, int peer,
                                                         int tag, const std::string& op) {
  int c = checked_count("send", n, 1, op, data, data);
  if (peer < 0 || peer >= size_)
    TS_THROW("send on group '", name_, "' (op '", op, "'): peer ", peer, " is not in 0..",
             size_ - 1);
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Isend(data, c, MPI_FLOAT, peer, tag, comm_, &request), "send (MPI_Isend)", name_,
            op, n);
  count("send", n * 4);
  return std::make_unique<MpiRequest>(request, name_, op, n, "send (wait)");
}

void MpiCommunicator::recv(float* data, int64_t n, int peer, int tag, const std::string& op) {
  int c = checked_count("recv", n, 1, op, data, data);
  if (peer < 0 || peer >= size_)
    TS_THROW("recv on group '", name_, "' (op '", op, "'): peer ", peer, " is not in 0..",
             size_ - 1);
  MPI_Status status;
  {
    WatchScope watch("recv", name_, op, n);
    check_mpi(MPI_Recv(data, c, MPI_FLOAT, peer, tag, comm_, &status), "recv (MPI_Recv)", name_, op,
              n);
  }
  int got = 0;
  MPI_Get_count(&status, MPI_FLOAT, &got);
  if (got != c)
    TS_THROW("recv on group '", name_, "' (op '", op, "'): expected ", n, " elements from rank ",
             peer, ", got ", got);
  count("recv", n * 4);
}

}  // namespace tessel
