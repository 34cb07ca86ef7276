// MpiCommunicator and the self communicator against expected values.
//
// Runs under mpirun with any number of ranks (1, 2, 4, 8 in CTest); every test
// reads the world size at run time. Every rank runs every test and issues the
// same collectives in the same order, so checks use EXPECT (not ASSERT) ahead
// of later collectives: a failing rank must not skip a collective the others
// are waiting in.
#include <gtest/gtest.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/error_of.h"
#include "mpi/collective_checks.h"
#include "tessel/base/error.h"
#include "tessel/comm/communicator.h"
#include "tessel/comm/fatal.h"
#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel {
namespace {

MpiRuntime& mpi() { return MpiRuntime::instance(); }

// A grid of rows x cols ranks over the world (cols = 2 when the world size is
// even): "rows" groups share a row, "cols" groups share a column.
struct Grid {
  int cols;
  int rows;
  int row;
  int col;
};

Grid grid() {
  Grid g;
  g.cols = mpi().world_size() % 2 == 0 ? 2 : 1;
  g.rows = mpi().world_size() / g.cols;
  g.row = mpi().world_rank() / g.cols;
  g.col = mpi().world_rank() % g.cols;
  return g;
}

TEST(MpiRuntime, WorldMatchesLauncher) {
  EXPECT_TRUE(mpi().initialized());
  EXPECT_GE(mpi().world_size(), 1);
  EXPECT_GE(mpi().world_rank(), 0);
  EXPECT_LT(mpi().world_rank(), mpi().world_size());
  if (const char* size = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_TRUE(MpiRuntime::launched_under_mpi());
    EXPECT_EQ(mpi().world_size(), std::atoi(size));
  }
  mpi().init(nullptr, nullptr);  // idempotent
  auto world = mpi().world("world");
  EXPECT_EQ(world->name(), "world");
  EXPECT_EQ(world->rank(), mpi().world_rank());
  EXPECT_EQ(world->size(), mpi().world_size());
  mpi().barrier();
}

TEST(MpiCommunicator, WorldCollectivesOddAndEvenLengths) {
  auto world = mpi().world("world");
  for (int64_t n : {1, 2, 3, 8, 1023, 4096, 20001}) check_collectives(*world, n);
}

TEST(MpiCommunicator, LargeAllReduce) {
  // Past Open MPI's small-message thresholds (ring / segmented algorithms).
  auto world = mpi().world("world");
  const int64_t n = (1 << 20) + 3;
  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = float(i % 1000 + world->rank());
  world->all_reduce(data.data(), n, ReduceKind::kSum, "large");
  const int p = world->size();
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += data[i] != float(p * (i % 1000) + p * (p - 1) / 2);
  EXPECT_EQ(bad, 0);
}

TEST(MpiCommunicator, ZeroLength) {
  auto world = mpi().world("world");
  check_collectives(*world, 0);
  // Null buffers are fine when there is nothing to move.
  world->all_reduce(nullptr, 0, ReduceKind::kSum, "empty");
  world->all_gather(nullptr, nullptr, 0, "empty");
  world->reduce_scatter(nullptr, nullptr, 0, "empty");
  world->all_to_all(nullptr, nullptr, 0, "empty");
  world->start_all_reduce(nullptr, 0, "empty")->wait();
  const CollectiveCount& c = world->stats().at("world").at("all_reduce");
  EXPECT_EQ(c.calls, 4);  // two from check_collectives, two above
  EXPECT_EQ(c.bytes, 0);
}

TEST(MpiCommunicator, SplitRowsAndColumns) {
  const Grid g = grid();
  auto rows = mpi().split("rows", g.row, g.col);
  auto cols = mpi().split("cols", g.col, g.row);
  EXPECT_EQ(rows->name(), "rows");
  EXPECT_EQ(cols->name(), "cols");
  EXPECT_EQ(rows->size(), g.cols);
  EXPECT_EQ(rows->rank(), g.col);
  EXPECT_EQ(cols->size(), g.rows);
  EXPECT_EQ(cols->rank(), g.row);

  // all_gather of world ranks lists the members in group-rank order.
  float me = float(mpi().world_rank());
  std::vector<float> members(rows->size());
  rows->all_gather(&me, members.data(), 1, "members");
  for (int c = 0; c < g.cols; ++c) EXPECT_EQ(members[c], float(g.row * g.cols + c));
  members.assign(cols->size(), -1.0f);
  cols->all_gather(&me, members.data(), 1, "members");
  for (int r = 0; r < g.rows; ++r) EXPECT_EQ(members[r], float(r * g.cols + g.col));

  // Sums stay inside the group.
  float sum = me;
  rows->all_reduce(&sum, 1, ReduceKind::kSum, "row_sum");
  EXPECT_EQ(sum, float(g.row * g.cols * g.cols + g.cols * (g.cols - 1) / 2));
  sum = me;
  cols->all_reduce(&sum, 1, ReduceKind::kSum, "col_sum");
  EXPECT_EQ(sum, float(g.cols * g.rows * (g.rows - 1) / 2 + g.rows * g.col));

  for (int64_t n : {0, 1, 5, 1001}) {
    check_collectives(*rows, n);
    check_collectives(*cols, n);
  }

  // Stats are per group, under the group's name.
  EXPECT_EQ(rows->stats().count("cols"), 0u);
  EXPECT_EQ(cols->stats().count("rows"), 0u);
  EXPECT_EQ(rows->stats().at("rows").at("all_gather").calls, 5);
  EXPECT_EQ(cols->stats().at("cols").at("all_reduce").calls, 9);
}

TEST(MpiCommunicator, SplitKeyOrdersRanks) {
  // One group, ordered by descending world rank.
  auto reversed = mpi().split("reversed", 7, -mpi().world_rank());
  EXPECT_EQ(reversed->size(), mpi().world_size());
  EXPECT_EQ(reversed->rank(), mpi().world_size() - 1 - mpi().world_rank());
  std::vector<float> order(reversed->size());
  float me = float(mpi().world_rank());
  reversed->all_gather(&me, order.data(), 1, "order");
  for (int r = 0; r < reversed->size(); ++r) EXPECT_EQ(order[r], float(reversed->size() - 1 - r));
  // Negative colors are rejected before MPI is called.
  EXPECT_NE(error_of([] { mpi().split("bad", -1, 0); }).find("color -1"), std::string::npos);
}

TEST(MpiCommunicator, NonBlockingAllReduceOverlapsLocalWork) {
  auto world = mpi().world("world");
  auto rows = mpi().split("rows", grid().row, grid().col);
  const int p = world->size();
  const int64_t n = 100003;
  std::vector<std::vector<float>> bufs(3, std::vector<float>(n));
  for (int b = 0; b < 3; ++b) {
    for (int64_t i = 0; i < n; ++i) bufs[b][i] = float(b + 1) * float(world->rank() + i % 3);
  }
  std::vector<float> row_buf(7, float(world->rank()));

  // Several requests in flight on two groups at once.
  std::vector<std::unique_ptr<CommRequest>> reqs;
  reqs.push_back(world->start_all_reduce(bufs[0].data(), n, "bucket0"));
  reqs.push_back(rows->start_all_reduce(row_buf.data(), 7, "row_bucket"));
  reqs.push_back(world->start_all_reduce(bufs[1].data(), n, "bucket1"));
  reqs.push_back(world->start_all_reduce(bufs[2].data(), n, "bucket2"));

  // Local work while the reductions progress; test() drives them.
  double local = 0;
  int polls = 0;
  bool all_done = false;
  while (!all_done) {
    for (int i = 0; i < 20000; ++i) local += 1.0 / (1.0 + i);
    all_done = true;
    for (auto& r : reqs) all_done = r->test() && all_done;
    ++polls;
  }
  EXPECT_GT(local, 0);
  EXPECT_GE(polls, 1);
  // Waiting again (in any order) is a no-op.
  for (int i = 3; i >= 0; --i) reqs[i]->wait();
  EXPECT_TRUE(reqs[0]->test());

  const float base = float(p * (p - 1) / 2);
  for (int b = 0; b < 3; ++b) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += bufs[b][i] != float(b + 1) * (base + p * (i % 3));
    EXPECT_EQ(bad, 0) << "bucket " << b;
  }
  const Grid g = grid();
  for (float v : row_buf) EXPECT_EQ(v, float(g.row * g.cols * g.cols + g.cols * (g.cols - 1) / 2));
}

TEST(MpiCommunicator, NonBlockingWaitInReverseAndDestroyWaits) {
  auto world = mpi().world("world");
  const int p = world->size();
  std::vector<float> a(1000, 1.0f), b(333, 2.0f), c(5, 3.0f);
  {
    auto ra = world->start_all_reduce(a.data(), 1000, "a");
    auto rb = world->start_all_reduce(b.data(), 333, "b");
    rb->wait();
    ra->wait();
    // Never waited: the destructor completes it.
    auto rc = world->start_all_reduce(c.data(), 5, "c");
  }
  for (float v : a) EXPECT_EQ(v, float(p));
  for (float v : b) EXPECT_EQ(v, 2.0f * p);
  for (float v : c) EXPECT_EQ(v, 3.0f * p);
}

TEST(MpiCommunicator, StatsCountCallsAndBytes) {
  auto world = mpi().world("stats_group");
  const int p = world->size();
  std::vector<float> buf(10 * p, 1.0f), out(10 * p);
  world->all_reduce(buf.data(), 10, ReduceKind::kSum, "x");
  world->reset_stats();
  EXPECT_TRUE(world->stats().empty());
  world->all_reduce(buf.data(), 10, ReduceKind::kSum, "x");
  world->all_reduce(buf.data(), 10, ReduceKind::kMax, "x");
  world->start_all_reduce(buf.data(), 5, "x")->wait();
  world->all_gather(buf.data(), out.data(), 3, "x");
  world->reduce_scatter(buf.data(), out.data(), 3, "x");
  world->all_to_all(buf.data(), out.data(), 2, "x");
  world->all_to_all(buf.data(), out.data(), 1, "x");

  const auto& stats = world->stats();
  ASSERT_EQ(stats.size(), 1u);
  const auto& g = stats.at("stats_group");
  EXPECT_EQ(g.size(), 4u);
  EXPECT_EQ(g.at("all_reduce").calls, 3);
  EXPECT_EQ(g.at("all_reduce").bytes, (10 + 10 + 5) * 4);
  EXPECT_EQ(g.at("all_gather").calls, 1);
  EXPECT_EQ(g.at("all_gather").bytes, 3 * 4);
  EXPECT_EQ(g.at("reduce_scatter").calls, 1);
  EXPECT_EQ(g.at("reduce_scatter").bytes, p * 3 * 4);
  EXPECT_EQ(g.at("all_to_all").calls, 2);
  EXPECT_EQ(g.at("all_to_all").bytes, p * (2 + 1) * 4);
}

TEST(MpiCommunicator, BadCountsThrowBeforeAnyMpiCall) {
  // Every rank throws alike without calling MPI, so nothing hangs.
  auto world = mpi().world("data");
  const int p = world->size();
  const int64_t too_many = int64_t{INT_MAX} + 1;
  std::string e = error_of([&] { world->all_reduce(nullptr, too_many, ReduceKind::kSum, "grad"); });
  EXPECT_NE(e.find("all_reduce"), std::string::npos) << e;
  EXPECT_NE(e.find("'data'"), std::string::npos) << e;
  EXPECT_NE(e.find("'grad'"), std::string::npos) << e;
  EXPECT_NE(e.find("2147483648"), std::string::npos) << e;
  EXPECT_NE(e.find("int count limit"), std::string::npos) << e;

  e = error_of([&] { world->start_all_reduce(nullptr, too_many, "grad_async"); });
  EXPECT_NE(e.find("'grad_async'"), std::string::npos) << e;
  // The block collectives move n * size() elements: that product must fit.
  const int64_t per_rank = int64_t{INT_MAX} / p + 1;  // int64: INT_MAX / 1 + 1 overflows int
  e = error_of([&] { world->all_gather(nullptr, nullptr, per_rank, "gather_w"); });
  EXPECT_NE(e.find("all_gather on group 'data' (op 'gather_w')"), std::string::npos) << e;
  e = error_of([&] { world->reduce_scatter(nullptr, nullptr, per_rank, "rs"); });
  EXPECT_NE(e.find("reduce_scatter"), std::string::npos) << e;
  e = error_of([&] { world->all_to_all(nullptr, nullptr, per_rank, "a2a"); });
  EXPECT_NE(e.find("all_to_all"), std::string::npos) << e;
  e = error_of([&] { world->all_reduce(nullptr, -1, ReduceKind::kSum, "neg"); });
  EXPECT_NE(e.find("negative"), std::string::npos) << e;
  e = error_of([&] { world->all_gather(nullptr, nullptr, 4, "nullbuf"); });
  EXPECT_NE(e.find("null buffer"), std::string::npos) << e;
  EXPECT_TRUE(world->stats().empty());

  // The group still works afterwards.
  float x = 1.0f;
  world->all_reduce(&x, 1, ReduceKind::kSum, "after");
  EXPECT_EQ(x, float(p));
}

TEST(MpiCommunicator, FailingMpiCallBecomesError) {
  // Ranks paired up; within a pair, mismatched all_gather counts make MPI
  // report MPI_ERR_TRUNCATE on the receiver of the longer message (group rank
  // 0). Open MPI gathers two ranks with one exchange, so nothing waits on the
  // failed rank. An odd rank out forms a group of one and skips the check.
  const int world_rank = mpi().world_rank();
  const bool paired = world_rank / 2 * 2 + 1 < mpi().world_size();
  auto pair = mpi().split("pair", world_rank / 2, world_rank);
  if (!paired) return;
  std::vector<float> in(8, 1.0f), out(16, 0.0f);
  const int64_t n = pair->rank() == 0 ? 4 : 8;
  if (pair->rank() != 0) {  // the sender of the longer message sees no error
    pair->all_gather(in.data(), out.data(), n, "mismatch");
  } else {
    std::string e = error_of([&] { pair->all_gather(in.data(), out.data(), n, "mismatch"); });
    EXPECT_NE(e.find("MPI all_gather failed on group 'pair' (op 'mismatch', 4 elements)"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("MPI_ERR_TRUNCATE"), std::string::npos) << e;
    EXPECT_TRUE(pair->stats().empty());  // failed calls are not counted
  }
}

TEST(SelfCommunicator, CopiesAndCounts) {
  auto self = make_self_communicator("local");
  EXPECT_EQ(self->name(), "local");
  EXPECT_EQ(self->rank(), 0);
  EXPECT_EQ(self->size(), 1);
  std::vector<float> a = {1, 2, 3}, b(3);
  self->all_reduce(a.data(), 3, ReduceKind::kSum, "x");
  self->all_reduce(a.data(), 3, ReduceKind::kMax, "x");
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  self->all_gather(a.data(), b.data(), 3, "x");
  EXPECT_EQ(b, a);
  b.assign(3, 0);
  self->reduce_scatter(a.data(), b.data(), 3, "x");
  EXPECT_EQ(b, a);
  b.assign(3, 0);
  self->all_to_all(a.data(), b.data(), 2, "x");
  EXPECT_EQ(b, (std::vector<float>{1, 2, 0}));
  self->all_gather(a.data(), a.data(), 3, "x");  // in place is fine
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  auto req = self->start_all_reduce(a.data(), 3, "x");
  EXPECT_TRUE(req->test());
  req->wait();
  self->all_reduce(nullptr, 0, ReduceKind::kSum, "x");

  const auto& g = self->stats().at("local");
  EXPECT_EQ(g.at("all_reduce").calls, 4);
  EXPECT_EQ(g.at("all_reduce").bytes, 3 * 4 * 3);
  EXPECT_EQ(g.at("all_gather").calls, 2);
  EXPECT_EQ(g.at("all_gather").bytes, 2 * 3 * 4);
  EXPECT_EQ(g.at("reduce_scatter").bytes, 3 * 4);
  EXPECT_EQ(g.at("all_to_all").bytes, 2 * 4);
  self->reset_stats();
  EXPECT_TRUE(self->stats().empty());

  std::string e = error_of([&] { self->all_reduce(a.data(), -2, ReduceKind::kSum, "neg"); });
  EXPECT_NE(e.find("all_reduce on group 'local' (op 'neg')"), std::string::npos) << e;
}

// Run only by the mpi_comm_timeout CTest (2 ranks, TESSEL_COMM_TIMEOUT_S=1):
// rank 0 enters an all_reduce the others never join, and the watchdog must
// abort the job with a message naming it.
TEST(MpiWatchdog, DISABLED_HangAbortsWithMessage) {
  if (!mpi().initialized() || mpi().timeout_s() <= 0) GTEST_SKIP() << "no TESSEL_COMM_TIMEOUT_S";
  auto world = mpi().world("hang_group");
  float x = 1.0f;
  if (world->rank() == 0) {
    world->all_reduce(&x, 1, ReduceKind::kSum, "lonely_op");
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(30));
  }
  ADD_FAILURE() << "the watchdog did not abort the job";
}

// An error on one rank while the others wait in a collective ends the job
// at once with that rank's message (run by the ctest mpi_error_aborts_job,
// which fails on a hang).
TEST(MpiFatal, DISABLED_ErrorOnOneRankAbortsTheJob) {
  auto world = mpi().world("fatal_group");
  float x = 1.0f;
  if (world->rank() == 1) report_fatal_error("injected failure on rank 1", 3);
  if (world->rank() == 0) world->all_reduce(&x, 1, ReduceKind::kSum, "never_joined");
  ADD_FAILURE() << "report_fatal_error did not abort the job";
}

}  // namespace
}  // namespace tessel
