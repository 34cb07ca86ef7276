// StagedCommunicator: collectives on a backend's device memory, carried by a
// communicator that reaches only host memory (Open MPI without GPU support,
// or ranks that share one GPU, where NCCL refuses to run).
//
// Each call copies its input from device memory into pinned host staging
// (Backend::copy_to_host), runs the inner communicator's collective on the
// staging, and copies the result back (copy_from_host). A call longer than
// `piece` elements per rank block runs piece by piece, so the staging is
// fixed when the communicator is made (staging_bytes): two buffers of
// size() * piece floats and the work buffer of the bf16 calls.
//
// Invariants: every result equals the inner communicator's result on the
// whole call, element for element, wherever the inner result of an element
// does not depend on the call's length: sums and maxima are elementwise
// (over 2 ranks an f32 sum is one addition; over more, MPI may choose
// another summation order for another message size), and the bf16 calls
// round and add each element alone, in rank order (communicator.h), so
// they are exact at any size. Each call is counted once, as a direct call
// is (the whole call's bytes), under this group's name; the inner
// communicator's own counts are not reported.
//
// Not yet: point-to-point messages (a pipeline's sends and receives throw
// naming this class), and overlapping a piece's copies with the previous
// piece's transfer: pieces run one after the other, and start_all_reduce
// completes before it returns.
#pragma once

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
  // Calls fn(first, length) for consecutive pieces of [0, n).
  template <class Fn>
  void by_piece(int64_t n, Fn fn) const;
  // Device `src` (rank-major blocks of n elements of `elem` bytes) -> staging:
  // elements [first, first + len) of every block, back to back; and back.
  void stage_blocks(const void* src, int64_t n, int64_t first, int64_t len, size_t elem);
  void unstage_blocks(void* dst, int64_t n, int64_t first, int64_t len, size_t elem);

  std::unique_ptr<Communicator> inner_;
  Backend& backend_;
  int64_t piece_;
  DeviceMemory in_, out_, work_;  // pinned host
};

}  // namespace tessel
