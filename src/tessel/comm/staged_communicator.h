// StagedCommunicator: collectives on a backend's device memory, carried by a
// communicator that reaches only host memory (Open MPI without GPU support,
// or ranks that share one GPU, where NCCL refuses to run).
//
// Each call copies its input into pinned host staging, runs the inner
// collective there and copies the result back, piece by piece (at most
// `piece` elements per rank block), so the staging is fixed when the
// communicator is made (staging_bytes).
//
// Invariants: every result equals the inner communicator's on the whole
// call wherever an element's result does not depend on the call's length:
// sums and maxima are elementwise (over more than 2 ranks MPI may choose
// another f32 summation order for another message size), and the bf16
// calls round and add each element alone, in rank order, so they are exact
// at any size. Each call is counted once with its whole bytes, as a direct
// call is; the inner communicator's counts are not reported.
//
// start_all_reduce returns at once: its pieces start in call order, two in
// flight at a time (one per staging slot), so a piece is copied in while
// the one before it travels; test() and wait() on any request of this
// communicator land arrived pieces and start the next. Every rank starts
// the same pieces in the same order. A blocking call first lands every sum
// in flight (it reuses their slots).
//
// Point-to-point messages throw: a pipeline stages its transfers itself
// (runtime/transfer_staging.h), since a send in flight needs staging of its
// own.
#pragma once

#include <deque>
#include <memory>
#include <string>

#include "tessel/backend/backend.h"
#include "tessel/comm/communicator.h"

namespace tessel {

class StagedCommunicator : public Communicator {
 public:
  // `piece`: elements per rank block staged at once (> 0).
  StagedCommunicator(std::unique_ptr<Communicator> inner, Backend& backend, int64_t piece);
  // Pinned host bytes a communicator of `ranks` ranks stages through.
  static size_t staging_bytes(int ranks, int64_t piece);

  const std::string& name() const override { return inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  void all_reduce(float* data, int64_t n, ReduceKind kind, const std::string& op) override;
  std::unique_ptr<CommRequest> start_all_reduce(float* data, int64_t n,
                                                const std::string& op) override;
  void all_gather(const float* in, float* out, int64_t n, const std::string& op) override;
  void reduce_scatter(const float* in, float* out, int64_t n, const std::string& op) override;
  void all_to_all(const float* in, float* out, int64_t n, const std::string& op) override;
  void all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                       const std::string& op) override;
  void all_reduce_bf16(float* data, int64_t n, void* work, const std::string& op) override;
  void reduce_scatter_bf16(const float* in, float* out, int64_t n, void* work,
                           const std::string& op) override;
  std::unique_ptr<CommRequest> start_send(const float* data, int64_t n, int peer, int tag,
                                          const std::string& op) override;
  void recv(float* data, int64_t n, int peer, int tag, const std::string& op) override;

 private:
  // One call piece by piece, over elements of `elem` bytes: each piece of
  // `in` (of every rank block of n elements when `in_blocks`, back to back)
  // is copied into in_, collective(piece length) runs, and the piece of
  // `out` (of every rank block when `out_blocks`) is copied back from
  // `result` (in_ for in-place collectives, else out_).
  template <class Collective>
  void piecewise(const void* in, bool in_blocks, void* out, bool out_blocks,
                 const DeviceMemory& result, int64_t n, size_t elem, Collective collective);
  [[noreturn]] void refuse_point_to_point(const char* call, const std::string& op) const;

  // One start_all_reduce: elements [0, started) have been sent, [0, landed)
  // are back in `data`.
  struct PendingSum {
    float* data;
    int64_t n;
    std::string op;
    int64_t started = 0, landed = 0;
  };
  struct PieceInFlight {
    std::shared_ptr<PendingSum> sum;
    int64_t first, len;
    float* slot;  // in_ or out_
    std::unique_ptr<CommRequest> request;
  };
  class SumRequest;
  // Starts the next pieces while a slot is free.
  void start_pieces();
  // Lands the oldest piece in flight if it has arrived (`block`: once it
  // has) and starts the next; false when it did not land or none is in flight.
  bool land_oldest(bool block);
  // Lands every sum in flight (before a blocking call).
  void finish_sums();

  std::unique_ptr<Communicator> inner_;
  Backend& backend_;
  int64_t piece_;
  DeviceMemory in_, out_, work_;                       // pinned host
  std::deque<std::shared_ptr<PendingSum>> unstarted_;  // call order
  std::deque<PieceInFlight> in_flight_;                // at most 2, start order
};

}  // namespace tessel
