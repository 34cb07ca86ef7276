#include "tessel/comm/staged_communicator.h"

#include <algorithm>
#include <cstdio>

namespace tessel {

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner, Backend& backend,
                                       int64_t piece)
    : inner_(std::move(inner)), backend_(backend), piece_(piece) {
  TS_CHECK(inner_, "StagedCommunicator: no inner communicator");
  if (piece_ <= 0)
    TS_THROW("staged communicator '", name(), "': the piece must be positive, got ", piece_);
  const size_t block = static_cast<size_t>(size()) * piece_ * sizeof(float);
  try {
    in_ = backend_.allocate(MemorySpace::kPinnedHost, block);
    out_ = backend_.allocate(MemorySpace::kPinnedHost, block);
    work_ = backend_.allocate(MemorySpace::kPinnedHost, staging_bytes(size(), piece_) - 2 * block);
  } catch (const Error& e) {
    TS_THROW("staged communicator '", name(), "' (", size(), " ranks, pieces of ", piece_,
             " elements): ", e.what(), " for its staging; lower staging_mib");
  }
}

size_t StagedCommunicator::staging_bytes(int ranks, int64_t piece) {
  const size_t work = std::max(all_reduce_bf16_work_bytes(piece, ranks),
                               reduce_scatter_bf16_work_bytes(piece, ranks));
  return 2 * static_cast<size_t>(ranks) * piece * sizeof(float) + work;
}

template <class Collective>
void StagedCommunicator::piecewise(const void* in, bool in_blocks, void* out, bool out_blocks,
                                   const DeviceMemory& result, int64_t n, size_t elem,
                                   Collective collective) {
  finish_sums();
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t first = 0; first < n; first += piece_) {
    const int64_t len = std::min(piece_, n - first);
    for (int r = 0; r < (in_blocks ? size() : 1); ++r)
      backend_.copy_to_host(in_.data() + r * len * elem, src + (r * n + first) * elem, len * elem);
    collective(len);
    for (int r = 0; r < (out_blocks ? size() : 1); ++r)
      backend_.copy_from_host(dst + (r * n + first) * elem, result.data() + r * len * elem,
                              len * elem);
  }
}

namespace {
float* f32(const DeviceMemory& m) { return reinterpret_cast<float*>(m.data()); }
uint16_t* bf16(const DeviceMemory& m) { return reinterpret_cast<uint16_t*>(m.data()); }
}  // namespace

void StagedCommunicator::all_reduce(float* data, int64_t n, ReduceKind kind,
                                    const std::string& op) {
  check_buffers("all_reduce", n, op, data, data);
  piecewise(data, false, data, false, in_, n, 4,
            [&](int64_t len) { inner_->all_reduce(f32(in_), len, kind, op); });
  count("all_reduce", n * 4);
}

// A start_all_reduce's handle: progress goes through the communicator,
// which lands pieces in start order.
class StagedCommunicator::SumRequest : public CommRequest {
 public:
  SumRequest(StagedCommunicator& comm, std::shared_ptr<PendingSum> sum)
      : comm_(comm), sum_(std::move(sum)) {}
  ~SumRequest() override {
    if (done()) return;
    try {
      wait();
    } catch (const Error& e) {
      std::fprintf(stderr, "tessel: unfinished staged all_reduce destroyed: %s\n", e.what());
    }
  }
  void wait() override {
    while (!done()) comm_.land_oldest(true);
  }
  bool test() override {
    while (!done() && comm_.land_oldest(false)) {
    }
    return done();
  }

 private:
  bool done() const { return sum_->landed == sum_->n; }
  StagedCommunicator& comm_;
  std::shared_ptr<PendingSum> sum_;
};

std::unique_ptr<CommRequest> StagedCommunicator::start_all_reduce(float* data, int64_t n,
                                                                  const std::string& op) {
  check_buffers("all_reduce", n, op, data, data);
  count("all_reduce", n * 4);
  auto sum = std::make_shared<PendingSum>(PendingSum{data, n, op});
  if (n > 0) unstarted_.push_back(sum);
  start_pieces();
  return std::make_unique<SumRequest>(*this, std::move(sum));
}

void StagedCommunicator::start_pieces() {
  while (in_flight_.size() < 2 && !unstarted_.empty()) {
    PendingSum& sum = *unstarted_.front();
    const int64_t len = std::min(piece_, sum.n - sum.started);
    // At most one piece is in flight here: the new one takes the other slot.
    float* slot = !in_flight_.empty() && in_flight_.back().slot == f32(in_) ? f32(out_) : f32(in_);
    backend_.copy_to_host(slot, sum.data + sum.started, len * sizeof(float));
    in_flight_.push_back(
        {unstarted_.front(), sum.started, len, slot, inner_->start_all_reduce(slot, len, sum.op)});
    sum.started += len;
    if (sum.started == sum.n) unstarted_.pop_front();
  }
}

bool StagedCommunicator::land_oldest(bool block) {
  start_pieces();
  if (in_flight_.empty()) return false;
  PieceInFlight& piece = in_flight_.front();
  if (block)
    piece.request->wait();
  else if (!piece.request->test())
    return false;
  backend_.copy_from_host(piece.sum->data + piece.first, piece.slot, piece.len * sizeof(float));
  piece.sum->landed += piece.len;
  in_flight_.pop_front();
  start_pieces();
  return true;
}

void StagedCommunicator::finish_sums() {
  while (land_oldest(true)) {
  }
}

void StagedCommunicator::all_gather(const float* in, float* out, int64_t n, const std::string& op) {
  check_buffers("all_gather", n, op, in, out);
  piecewise(in, false, out, true, out_, n, 4,
            [&](int64_t len) { inner_->all_gather(f32(in_), f32(out_), len, op); });
  count("all_gather", n * 4);
}

void StagedCommunicator::reduce_scatter(const float* in, float* out, int64_t n,
                                        const std::string& op) {
  check_buffers("reduce_scatter", n, op, in, out);
  piecewise(in, true, out, false, out_, n, 4,
            [&](int64_t len) { inner_->reduce_scatter(f32(in_), f32(out_), len, op); });
  count("reduce_scatter", int64_t{size()} * n * 4);
}

void StagedCommunicator::all_to_all(const float* in, float* out, int64_t n, const std::string& op) {
  check_buffers("all_to_all", n, op, in, out);
  piecewise(in, true, out, true, out_, n, 4,
            [&](int64_t len) { inner_->all_to_all(f32(in_), f32(out_), len, op); });
  count("all_to_all", int64_t{size()} * n * 4);
}

void StagedCommunicator::all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                                         const std::string& op) {
  check_buffers("all_gather", n, op, in, out);
  piecewise(in, false, out, true, out_, n, 2,
            [&](int64_t len) { inner_->all_gather_bf16(bf16(in_), bf16(out_), len, op); });
  count("all_gather", n * 2);
}

void StagedCommunicator::all_reduce_bf16(float* data, int64_t n, void*, const std::string& op) {
  check_buffers("all_reduce", n, op, data, data);
  piecewise(data, false, data, false, in_, n, 4,
            [&](int64_t len) { inner_->all_reduce_bf16(f32(in_), len, work_.data(), op); });
  count("all_reduce", n * 2);
}

void StagedCommunicator::reduce_scatter_bf16(const float* in, float* out, int64_t n, void*,
                                             const std::string& op) {
  check_buffers("reduce_scatter", n, op, in, out);
  piecewise(in, true, out, false, out_, n, 4, [&](int64_t len) {
    inner_->reduce_scatter_bf16(f32(in_), f32(out_), len, work_.data(), op);
  });
  count("reduce_scatter", int64_t{size()} * n * 2);
}

void StagedCommunicator::refuse_point_to_point(const char* call, const std::string& op) const {
  TS_THROW(call, " on group '", name(), "' (op '", op,
           "'): a staged communicator carries collectives only; a pipeline stages its "
           "transfers itself (TransferStaging) on the plain communicator");
}

std::unique_ptr<CommRequest> StagedCommunicator::start_send(const float*, int64_t, int, int,
                                                            const std::string& op) {
  refuse_point_to_point("send", op);
}

void StagedCommunicator::recv(float*, int64_t, int, int, const std::string& op) {
  refuse_point_to_point("recv", op);
}

}  // namespace tessel
