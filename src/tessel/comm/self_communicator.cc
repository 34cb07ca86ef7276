// make_self_communicator: a group of one rank. Every collective is a copy (or
// nothing); calls and bytes are counted with the same formulas as the MPI
// implementation so single-process stats match a one-rank MPI run.
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/comm/communicator.h"

namespace tessel {
namespace {

class SelfCommunicator : public Communicator {
 public:
  explicit SelfCommunicator(std::string name) : name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  int rank() const override { return 0; }
  int size() const override { return 1; }

  void all_reduce(float* data, int64_t n, ReduceKind kind, const std::string& op) override {
    check_buffers("all_reduce", n, op, data, data);
    count("all_reduce", n * 4);
  }

  std::unique_ptr<CommRequest> start_all_reduce(float* data, int64_t n,
                                                const std::string& op) override {
    check_buffers("all_reduce", n, op, data, data);
    count("all_reduce", n * 4);
    return std::make_unique<CompletedRequest>();
  }

  void all_gather(const float* in, float* out, int64_t n, const std::string& op) override {
    check_buffers("all_gather", n, op, in, out);
    copy(in, out, n);
    count("all_gather", n * 4);
  }

  void reduce_scatter(const float* in, float* out, int64_t n, const std::string& op) override {
    check_buffers("reduce_scatter", n, op, in, out);
    copy(in, out, n);
    count("reduce_scatter", n * 4);
  }

  void all_to_all(const float* in, float* out, int64_t n, const std::string& op) override {
    check_buffers("all_to_all", n, op, in, out);
    copy(in, out, n);
    count("all_to_all", n * 4);
  }

  void all_gather_bf16(const uint16_t* in, uint16_t* out, int64_t n,
                       const std::string& op) override {
    check_buffers("all_gather", n, op, in, out);
    if (n > 0 && in != out) std::memmove(out, in, static_cast<size_t>(n) * sizeof(uint16_t));
    count("all_gather", n * 2);
  }

  // One contribution: rounded to bf16 once, as a group of many would.
  void all_reduce_bf16(float* data, int64_t n, void* work, const std::string& op) override {
    check_buffers("all_reduce", n, op, data, work);
    round_bf16_in_f32(data, data, n);
    count("all_reduce", n * 2);
  }

  // One contribution: rounded to bf16 once (summing one value adds nothing).
  void reduce_scatter_bf16(const float* in, float* out, int64_t n, void* work,
                           const std::string& op) override {
    check_buffers("reduce_scatter", n, op, in, out);
    round_bf16_in_f32(in, out, n);
    count("reduce_scatter", n * 2);
  }

  // Sending to oneself queues the message until the matching recv.
  std::unique_ptr<CommRequest> start_send(const float* data, int64_t n, int peer, int tag,
                                          const std::string& op) override {
    check_buffers("send", n, op, data, data);
    check_peer("send", peer, op);
    mailbox_[tag].emplace_back(data, data + n);
    count("send", n * 4);
    return std::make_unique<CompletedRequest>();
  }

  void recv(float* data, int64_t n, int peer, int tag, const std::string& op) override {
    check_buffers("recv", n, op, data, data);
    check_peer("recv", peer, op);
    auto it = mailbox_.find(tag);
    if (it == mailbox_.end() || it->second.empty())
      TS_THROW("recv on group '", name_, "' (op '", op, "'): no message with tag ", tag,
               " was sent; a group of one would wait forever");
    std::vector<float>& m = it->second.front();
    if (static_cast<int64_t>(m.size()) != n)
      TS_THROW("recv on group '", name_, "' (op '", op, "'): expected ", n,
               " elements, the message holds ", m.size());
    copy(m.data(), data, n);
    it->second.pop_front();
    count("recv", n * 4);
  }

 private:
  void check_peer(const char* what, int peer, const std::string& op) const {
    if (peer != 0)
      TS_THROW(what, " on group '", name_, "' (op '", op, "'): peer ", peer,
               " is not in a group of one");
  }

  static void copy(const float* in, float* out, int64_t n) {
    if (n > 0 && in != out) std::memmove(out, in, static_cast<size_t>(n) * sizeof(float));
  }

  std::string name_;
  std::map<int, std::deque<std::vector<float>>> mailbox_;
};

}  // namespace

std::unique_ptr<Communicator> make_self_communicator(const std::string& name) {
  return std::make_unique<SelfCommunicator>(name);
}

}  // namespace tessel
