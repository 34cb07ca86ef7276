// Communicator: collectives over one group of ranks (one mesh axis).
//
// The runtime reaches the network only through this interface, so tests can
// run a group of one in-process and inject faults. Buffers are f32 (bf16 in
// the _bf16 calls) and the
// layouts are rank-major: all_gather's output and reduce_scatter's input hold
// one contiguous block per rank, in rank order (the caller packs and unpacks
// strided shards). Every call is counted (calls and bytes sent per rank) in
// CommStats, keyed by the group's name (the mesh axis, e.g. "data").
// Implementations are not thread-safe: one caller thread per communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "tessel/base/error.h"

namespace tessel {

enum class ReduceKind { kSum, kMax };

// Counts of one collective kind on one group.
struct CollectiveCount {
  int64_t calls = 0;
  int64_t bytes = 0;  // payload bytes this rank contributed (see each call)
  // Bytes this rank sends on the wire with ring algorithms: all-reduce
  // 2N(p-1)/p, reduce-scatter and all-gather N(p-1)/p, all-to-all N(p-1)/p,
  // for a full (unsharded) buffer of N bytes over p ranks. An all-reduce moves
  // exactly what a reduce-scatter plus an all-gather move.
  int64_t wire_bytes = 0;
};

// Per group name, per collective name ("all_reduce", "all_gather",
// "reduce_scatter", "all_to_all", "send", "recv").
using CommStats = std::map<std::string, std::map<std::string, CollectiveCount>>;

// A non-blocking operation in flight; wait() completes it (idempotent).
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  virtual void wait() = 0;
  // Drives progress without blocking; true once complete.
  virtual bool test() = 0;
};

// A request complete when it was made.
class CompletedRequest : public CommRequest {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual const std::string& name() const = 0;  // group name for errors and stats
  virtual int rank() const = 0;                 // rank within this group
  virtual int size() const = 0;

  // data[0..n) := reduction over ranks of data[0..n). bytes counted: n*4.
  virtual void all_reduce(float* data, int64_t n, ReduceKind kind, const std::string& op) = 0;
  // Non-blocking in-place all-reduce (sum); `data` must stay valid until wait().
  virtual std::unique_ptr<CommRequest> start_all_reduce(float* data, int64_t n,
                                                        const std::string& op) = 0;
  // out[r*n .. (r+1)*n) := rank r's in[0..n). bytes counted: n*4.
  virtual void all_gather(const float* in, float* out, int64_t n, const std::string& op) = 0;
  // out[0..n) := sum over ranks of their in[rank()*n .. (rank()+1)*n). bytes: size()*n*4.
  virtual void reduce_scatter(const float* in, float* out, int64_t n, const std::string& op) = 0;
  // out[r*n .. (r+1)*n) := rank r's in[rank()*n .. (rank()+1)*n). bytes: size()*n*4.
  virtual void all_to_all(const float* in, float* out, int64_t n, const std::string& op) = 0;

  // bf16 payloads: each element's bits in a uint16_t (base/bf16.h),
  // counted at 2 bytes per element under the same collective names.
  // out[r*n .. (r+1)*n) := rank r's in[0..n). bytes counted: n*2.
  virtual void all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                               const std::string& op) = 0;
  // data[0..n) := the sum over ranks of data[0..n), carried in bf16 and added
  // in f32: each rank's values are rounded to bf16 once; rank r receives
  // every rank's bf16 values of its chunk r (all-to-all), adds them in f32 in
  // rank order (deterministic), rounds the sum to bf16 once and the sums are
  // all-gathered; every rank ends with the same values. `work` holds
  // all_reduce_bf16_work_bytes(n, size()) bytes. Blocking. Counted as
  // "all_reduce", n*2 bytes (an all-to-all plus an all-gather of bf16 move
  // what a ring all-reduce of bf16 moves).
  virtual void all_reduce_bf16(float* data, int64_t n, void* work, const std::string& op) = 0;
  // out[0..n) := the sum over ranks of their in[rank()*n .. (rank()+1)*n),
  // carried in bf16 and added in f32: each rank rounds its p*n values to
  // bf16 once, an all-to-all gives rank r every rank's bf16 block r, which it
  // adds in f32 in rank order (deterministic) into `out`, not rounded again.
  // `work` holds reduce_scatter_bf16_work_bytes(n, size()) bytes. Blocking.
  // Counted as "reduce_scatter", size()*n*2 bytes.
  virtual void reduce_scatter_bf16(const float* in, float* out, int64_t n, void* work,
                                   const std::string& op) = 0;

  // Point to point (pipeline stages). Sends data[0..n) to group rank `peer`
  // without blocking; `data` must stay valid until wait(). Counted as "send",
  // n*4 bytes. Messages between two ranks match by `tag`, not by order.
  virtual std::unique_ptr<CommRequest> start_send(const float* data, int64_t n, int peer, int tag,
                                                  const std::string& op) = 0;
  // Blocks until the message `tag` from `peer` arrives; it must hold exactly n
  // floats. Counted as "recv", n*4 bytes.
  virtual void recv(float* data, int64_t n, int peer, int tag, const std::string& op) = 0;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_.clear(); }

 protected:
  // Throws unless n >= 0 and, for n > 0, both buffers are non-null; before
  // any transfer, so every rank throws alike.
  void check_buffers(const char* collective, int64_t n, const std::string& op, const void* in,
                     const void* out) const {
    if (n < 0)
      TS_THROW(collective, " on group '", name(), "' (op '", op, "'): element count ", n,
               " is negative");
    if (n > 0 && (in == nullptr || out == nullptr))
      TS_THROW(collective, " on group '", name(), "' (op '", op, "'): null buffer for ", n,
               " elements");
  }

  void count(const char* collective, int64_t bytes) {
    CollectiveCount& c = stats_[name()][collective];
    ++c.calls;
    c.bytes += bytes;
    const int64_t p = size();
    const std::string kind = collective;
    if (kind == "all_reduce")
      c.wire_bytes += 2 * bytes * (p - 1) / p;
    else if (kind == "all_gather")
      c.wire_bytes += bytes * (p - 1);  // bytes = one shard
    else if (kind == "send")
      c.wire_bytes += bytes;
    else if (kind == "recv")
      return;  // the sender counts the wire
    else
      c.wire_bytes += bytes * (p - 1) / p;  // bytes = the full buffer
  }

 private:
  CommStats stats_;
};

// Element range [chunk_begin(r), chunk_begin(r + 1)) of n elements split
// over p ranks as evenly as possible (all_reduce_bf16's chunks).
inline int64_t chunk_begin(int64_t n, int p, int r) { return n * r / p; }
// Bytes of all_reduce_bf16's work buffer: the rounded values (n bf16) and
// every rank's copy of the largest chunk (p * ceil(n / p) bf16).
inline size_t all_reduce_bf16_work_bytes(int64_t n, int p) {
  const int64_t chunk = (n + p - 1) / p;
  return static_cast<size_t>(n + p * chunk) * 2;
}

// Bytes of reduce_scatter_bf16's work buffer: the p*n rounded values and the
// p*n received ones (bf16).
inline size_t reduce_scatter_bf16_work_bytes(int64_t n, int p) {
  return static_cast<size_t>(2 * int64_t{p} * n) * 2;
}

// A group of one rank: every collective is a copy (or nothing). Used for
// single-process runs and unit tests.
std::unique_ptr<Communicator> make_self_communicator(const std::string& name);

}  // namespace tessel
