// MpiCommunicator: Tessel's collectives and point-to-point messages over one
// MPI communicator, each checked and watched (mpi_calls.h).
#include <climits>
#include <cstdio>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/comm/mpi/mpi_calls.h"
#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel {

using mpi_detail::check_mpi;
using mpi_detail::mpi_finalized;
using mpi_detail::WatchScope;

namespace {

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

template <class Call>
void MpiCommunicator::watched(const char* collective, const char* label, const std::string& op,
                              int64_t n, Call call) const {
  WatchScope watch(collective, name_, op, n);
  check_mpi(call(), label, name_, op, n);
}

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
  if (n > INT_MAX / blocks) {  // a negative n is check_buffers' error
    TS_THROW(collective, " on group '", name_, "' (op '", op, "'): ", n, " elements",
             (blocks > 1 ? str_cat(" x ", blocks, " ranks") : std::string()),
             " exceed MPI's int count limit ", INT_MAX, "; split the call into smaller pieces");
  }
  check_buffers(collective, n, op, in, out);
  return static_cast<int>(n);
}

void MpiCommunicator::all_reduce(float* data, int64_t n, ReduceKind kind, const std::string& op) {
  int c = checked_count("all_reduce", n, 1, op, data, data);
  MPI_Op mpi_op = kind == ReduceKind::kSum ? MPI_SUM : MPI_MAX;
  watched("all_reduce", "all_reduce", op, n,
          [&] { return MPI_Allreduce(MPI_IN_PLACE, data, c, MPI_FLOAT, mpi_op, comm_); });
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
  watched("all_gather", "all_gather", op, n,
          [&] { return MPI_Allgather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm_); });
  count("all_gather", n * 4);
}

void MpiCommunicator::reduce_scatter(const float* in, float* out, int64_t n,
                                     const std::string& op) {
  int c = checked_count("reduce_scatter", n, size_, op, in, out);
  watched("reduce_scatter", "reduce_scatter", op, n,
          [&] { return MPI_Reduce_scatter_block(in, out, c, MPI_FLOAT, MPI_SUM, comm_); });
  count("reduce_scatter", int64_t{size_} * n * 4);
}

void MpiCommunicator::all_to_all(const float* in, float* out, int64_t n, const std::string& op) {
  int c = checked_count("all_to_all", n, size_, op, in, out);
  watched("all_to_all", "all_to_all", op, n,
          [&] { return MPI_Alltoall(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm_); });
  count("all_to_all", int64_t{size_} * n * 4);
}

void MpiCommunicator::all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                                      const std::string& op) {
  int c = checked_count("all_gather", n, size_, op, in, out);
  watched("all_gather", "all_gather", op, n,
          [&] { return MPI_Allgather(in, c, MPI_UINT16_T, out, c, MPI_UINT16_T, comm_); });
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
  watched("all_reduce", "all_reduce (bf16: MPI_Alltoallv)", op, n, [&] {
    return MPI_Alltoallv(values, send_counts.data(), send_displs.data(), MPI_UINT16_T, chunks,
                         recv_counts.data(), recv_displs.data(), MPI_UINT16_T, comm_);
  });
  uint16_t* sums = values + send_displs[rank_];
#pragma omp parallel for schedule(static) if (mine >= (1 << 15))
  for (int64_t i = 0; i < mine; ++i) {
    float acc = 0.0f;
    for (int r = 0; r < p; ++r) acc += bf16_bits_to_f32(chunks[r * mine + i]);
    sums[i] = f32_to_bf16_bits(acc);
  }
  watched("all_reduce", "all_reduce (bf16: MPI_Allgatherv)", op, n, [&] {
    return MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, values, send_counts.data(),
                          send_displs.data(), MPI_UINT16_T, comm_);
  });
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
  watched("reduce_scatter", "reduce_scatter (bf16: MPI_Alltoall)", op, n,
          [&] { return MPI_Alltoall(values, c, MPI_UINT16_T, blocks, c, MPI_UINT16_T, comm_); });
#pragma omp parallel for schedule(static) if (n >= (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int r = 0; r < p; ++r) acc += bf16_bits_to_f32(blocks[r * n + i]);
    out[i] = acc;
  }
  count("reduce_scatter", int64_t{p} * n * 2);
}

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
  watched("recv", "recv (MPI_Recv)", op, n,
          [&] { return MPI_Recv(data, c, MPI_FLOAT, peer, tag, comm_, &status); });
  int got = 0;
  MPI_Get_count(&status, MPI_FLOAT, &got);
  if (got != c)
    TS_THROW("recv on group '", name_, "' (op '", op, "'): expected ", n, " elements from rank ",
             peer, ", got ", got);
  count("recv", n * 4);
}

}  // namespace tessel
