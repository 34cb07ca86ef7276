// MPI runtime and the MPI implementation of Communicator.
//
// Only comm/mpi/ includes <mpi.h>; the rest of the code talks to other ranks
// through Communicator. The definitions are split by concern: mpi_runtime.cc
// (start, end, communicators), mpi_watchdog.cc (the hang watchdog),
// mpi_communicator.cc (the collectives), mpi_calls.* (checked calls).
//
// MpiRuntime is the process-wide MPI state: init() starts MPI once (thread
// level MPI_THREAD_FUNNELED: only the thread that called init() may call
// MPI), switches MPI_COMM_WORLD to MPI_ERRORS_RETURN so failures come back as
// codes (turned into tessel::Error), and registers MPI_Finalize at exit (run
// once, and only if init() started MPI). It also keeps freed memory in the
// heap (base/heap_reuse.h): MPI's collectives allocate a temporary per call.
// A plain single process does not need MPI at all: check
// launched_under_mpi() and use make_self_communicator().
//
// Hang watchdog (on by default: 300 s; the environment variable
// TESSEL_COMM_TIMEOUT_S sets the limit in seconds, 0 turns it off): a
// background thread aborts the whole job (MPI_Abort, exit code 124) once one
// blocking call (a collective, a request wait() or barrier()) has been in
// flight longer than the limit, with a message naming the collective, group,
// op and element count, and, from the peers' heartbeats (comm/heartbeat.h),
// the ranks that did not arrive (stopped, dead, computing, or blocked in a
// different call). While a peer is in I/O (begin_io/end_io, e.g. writing a
// checkpoint) the clock restarts: I/O is never a hang.
//
// MpiCommunicator owns one MPI_Comm and frees it on destruction (unless MPI
// has already been finalised). Collectives are collective over the group:
// every member must issue the same calls, with the same counts, in the same
// order. Counts must fit in an int (MPI's count type); larger buffers throw
// before any MPI call, so a bad count never hangs the job. Not thread-safe:
// use from the thread that called MpiRuntime::init().
#pragma once

// Only the C API is used; skip the deprecated C++ bindings (and their warnings).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <memory>
#include <string>

#include "tessel/comm/communicator.h"

namespace tessel {

class MpiRuntime {
 public:
  static MpiRuntime& instance();

  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  // Starts MPI if nobody has yet (idempotent); argc/argv may be null.
  void init(int* argc, char*** argv);
  bool initialized() const { return initialized_; }
  // True when an MPI launcher (mpirun, srun, ...) started this process.
  static bool launched_under_mpi();

  int world_rank() const;
  int world_size() const;

  // A communicator over all ranks (a duplicate of MPI_COMM_WORLD). Collective.
  std::unique_ptr<Communicator> world(const std::string& name);
  // MPI_Comm_split of the world: ranks with the same color (>= 0) form one
  // group, ordered by key (ties by world rank). Collective over the world:
  // every rank must call it, in the same order as the other ranks.
  std::unique_ptr<Communicator> split(const std::string& name, int color, int key);

  // Ends every rank of the job with exit code `code` (MPI_Abort).
  [[noreturn]] void abort(int code);
  // Waits until every rank of the world has called barrier().
  void barrier();

  // Watchdog bookkeeping (no-ops when the watchdog is off). One
  // blocking call is tracked at a time: begin_blocking() before it,
  // end_blocking() after (mpi_calls.h's WatchScope does both).
  // timeout_s() is 0 when the watchdog is off.
  bool watchdog_enabled() const { return timeout_s_ > 0; }
  void begin_blocking(const char* collective, const std::string& group, const std::string& op,
                      int64_t n);
  void end_blocking();
  // Marks this rank as doing I/O (nests); peers' watchdogs wait for it.
  void begin_io(const std::string& what);
  void end_io();
  double timeout_s() const { return timeout_s_; }

 private:
  MpiRuntime();  // mpi_watchdog.cc, where Watchdog is complete
  ~MpiRuntime();
  void require_initialized(const char* what) const;
  static void finalize_at_exit();
  void start_watchdog();
  void stop_watchdog();
  void watchdog_loop();

  bool initialized_ = false;  // MPI usable (by us or by whoever started it)
  bool we_started_ = false;   // we called MPI_Init_thread, so we finalize
  int world_rank_ = 0;
  int world_size_ = 1;
  double timeout_s_ = 0;
  struct Watchdog;
  std::unique_ptr<Watchdog> watchdog_;
};

class MpiCommunicator : public Communicator {
 public:
  // Takes ownership of `comm` (freed in the destructor).
  MpiCommunicator(MPI_Comm comm, std::string name);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(float* data, int64_t n, ReduceKind kind, const std::string& op) override;
  // The request's wait() is MPI_Wait, test() is MPI_Test; destroying an
  // unfinished request waits for it.
  std::unique_ptr<CommRequest> start_all_reduce(float* data, int64_t n,
                                                const std::string& op) override;
  void all_gather(const float* in, float* out, int64_t n, const std::string& op) override;
  void reduce_scatter(const float* in, float* out, int64_t n, const std::string& op) override;
  void all_to_all(const float* in, float* out, int64_t n, const std::string& op) override;
  void all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                       const std::string& op) override;
  // MPI_Alltoallv of the bf16 chunks, f32 sums, MPI_Allgatherv (in place).
  void all_reduce_bf16(float* data, int64_t n, void* work, const std::string& op) override;
  void reduce_scatter_bf16(const float* in, float* out, int64_t n, void* work,
                           const std::string& op) override;
  // MPI_Isend / MPI_Recv; the receive is watched like a collective.
  std::unique_ptr<CommRequest> start_send(const float* data, int64_t n, int peer, int tag,
                                          const std::string& op) override;
  void recv(float* data, int64_t n, int peer, int tag, const std::string& op) override;

 private:
  // Throws unless 0 <= n, n * blocks fits in an MPI count and the buffers are
  // non-null when n > 0; returns int(n). Runs before any MPI call, so every
  // rank throws alike and a bad argument cannot hang the group.
  int checked_count(const char* collective, int64_t n, int64_t blocks, const std::string& op,
                    const void* in, const void* out) const;
  // Runs the blocking MPI call `call` under a WatchScope (`collective`) and
  // checks its code (check_mpi, naming `label`).
  template <class Call>
  void watched(const char* collective, const char* label, const std::string& op, int64_t n,
               Call call) const;

  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tessel
