#include "tessel/comm/staged_communicator.h"

#include <algorithm>

namespace tessel {

StagedCommunicator::StagedCommunicator(std::unique_ptr<Communicator> inner, Backend& backend,
                                       int64_t piece)
    : inner_(std::move(inner)), backend_(backend), piece_(piece) {
  TS_CHECK(inner_, "StagedCommunicator: no inner communicator");
  if (piece_ <= 0)
    TS_THROW("staged communicator '", name(), "': the piece must be positive, got ", piece_);
  const size_t block = static_cast<size_t>(size()) * piece_ * sizeof(float);
  in_ = backend_.allocate(MemorySpace::kPinnedHost, block);
  out_ = backend_.allocate(MemorySpace::kPinnedHost, block);
  work_ = backend_.allocate(MemorySpace::kPinnedHost, staging_bytes(size(), piece_) - 2 * block);
}

size_t StagedCommunicator::staging_bytes(int ranks, int64_t piece) {
  const size_t work = std::max(all_reduce_bf16_work_bytes(piece, ranks),
                               reduce_scatter_bf16_work_bytes(piece, ranks));
  return 2 * static_cast<size_t>(ranks) * piece * sizeof(float) + work;
}

template <class Fn>
void StagedCommunicator::by_piece(int64_t n, Fn fn) const {
  for (int64_t first = 0; first < n; first += piece_) fn(first, std::min(piece_, n - first));
}

void StagedCommunicator::stage_blocks(const void* src, int64_t n, int64_t first, int64_t len,
                                      size_t elem) {
  for (int r = 0; r < size(); ++r)
    backend_.copy_to_host(in_.data() + r * len * elem,
                          static_cast<const uint8_t*>(src) + (r * n + first) * elem, len * elem);
}

void StagedCommunicator::unstage_blocks(void* dst, int64_t n, int64_t first, int64_t len,
                                        size_t elem) {
  for (int r = 0; r < size(); ++r)
    backend_.copy_from_host(static_cast<uint8_t*>(dst) + (r * n + first) * elem,
                            out_.data() + r * len * elem, len * elem);
}

void StagedCommunicator::all_reduce(float* data, int64_t n, ReduceKind kind,
                                    const std::string& op) {
  check_buffers("all_reduce", n, op, data, data);
  float* staged = reinterpret_cast<float*>(in_.data());
  by_piece(n, [&](int64_t first, int64_t len) {
    backend_.copy_to_host(staged, data + first, len * sizeof(float));
    inner_->all_reduce(staged, len, kind, op);
    backend_.copy_from_host(data + first, staged, len * sizeof(float));
  });
  count("all_reduce", n * 4);
}

std::unique_ptr<CommRequest> StagedCommunicator::start_all_reduce(float* data, int64_t n,
                                                                  const std::string& op) {
  all_reduce(data, n, ReduceKind::kSum, op);
  return std::make_unique<CompletedRequest>();
}

void StagedCommunicator::all_gather(const float* in, float* out, int64_t n, const std::string& op) {
  check_buffers("all_gather", n, op, in, out);
  by_piece(n, [&](int64_t first, int64_t len) {
    backend_.copy_to_host(in_.data(), in + first, len * sizeof(float));
    inner_->all_gather(reinterpret_cast<float*>(in_.data()), reinterpret_cast<float*>(out_.data()),
                       len, op);
    unstage_blocks(out, n, first, len, sizeof(float));
  });
  count("all_gather", n * 4);
}

void StagedCommunicator::reduce_scatter(const float* in, float* out, int64_t n,
                                        const std::string& op) {
  check_buffers("reduce_scatter", n, op, in, out);
  by_piece(n, [&](int64_t first, int64_t len) {
    stage_blocks(in, n, first, len, sizeof(float));
    inner_->reduce_scatter(reinterpret_cast<float*>(in_.data()),
                           reinterpret_cast<float*>(out_.data()), len, op);
    backend_.copy_from_host(out + first, out_.data(), len * sizeof(float));
  });
  count("reduce_scatter", int64_t{size()} * n * 4);
}

void StagedCommunicator::all_to_all(const float* in, float* out, int64_t n, const std::string& op) {
  check_buffers("all_to_all", n, op, in, out);
  by_piece(n, [&](int64_t first, int64_t len) {
    stage_blocks(in, n, first, len, sizeof(float));
    inner_->all_to_all(reinterpret_cast<float*>(in_.data()), reinterpret_cast<float*>(out_.data()),
                       len, op);
    unstage_blocks(out, n, first, len, sizeof(float));
  });
  count("all_to_all", int64_t{size()} * n * 4);
}

void StagedCommunicator::all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                                         const std::string& op) {
  check_buffers("all_gather", n, op, in, out);
  by_piece(n, [&](int64_t first, int64_t len) {
    backend_.copy_to_host(in_.data(), in + first, len * sizeof(uint16_t));
    inner_->all_gather_bf16(reinterpret_cast<uint16_t*>(in_.data()),
                            reinterpret_cast<uint16_t*>(out_.data()), len, op);
    unstage_blocks(out, n, first, len, sizeof(uint16_t));
  });
  count("all_gather", n * 2);
}

void StagedCommunicator::all_reduce_bf16(float* data, int64_t n, void*, const std::string& op) {
  check_buffers("all_reduce", n, op, data, data);
  float* staged = reinterpret_cast<float*>(in_.data());
  by_piece(n, [&](int64_t first, int64_t len) {
    backend_.copy_to_host(staged, data + first, len * sizeof(float));
    inner_->all_reduce_bf16(staged, len, work_.data(), op);
    backend_.copy_from_host(data + first, staged, len * sizeof(float));
  });
  count("all_reduce", n * 2);
}

void StagedCommunicator::reduce_scatter_bf16(const float* in, float* out, int64_t n, void*,
                                             const std::string& op) {
  check_buffers("reduce_scatter", n, op, in, out);
  by_piece(n, [&](int64_t first, int64_t len) {
    stage_blocks(in, n, first, len, sizeof(float));
    inner_->reduce_scatter_bf16(reinterpret_cast<float*>(in_.data()),
                                reinterpret_cast<float*>(out_.data()), len, work_.data(), op);
    backend_.copy_from_host(out + first, out_.data(), len * sizeof(float));
  });
  count("reduce_scatter", int64_t{size()} * n * 2);
}

std::unique_ptr<CommRequest> StagedCommunicator::start_send(const float*, int64_t, int, int,
                                                            const std::string& op) {
  TS_THROW("send on group '", name(), "' (op '", op,
           "'): point-to-point messages are not staged yet (StagedCommunicator): pipelines need "
           "direct communicators");
}

void StagedCommunicator::recv(float*, int64_t, int, int, const std::string& op) {
  TS_THROW("recv on group '", name(), "' (op '", op,
           "'): point-to-point messages are not staged yet (StagedCommunicator): pipelines need "
           "direct communicators");
}

}  // namespace tessel
