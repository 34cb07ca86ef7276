// main() for tessel_mpi_tests, run under mpirun with any number of ranks.
//
// Starts MPI, runs every test on every rank, prints the usual gtest output on
// rank 0 only (other ranks print just their failures, prefixed with the rank),
// and exits non-zero on every rank if any rank failed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "tessel/comm/mpi/mpi_runtime.h"

namespace {

// Prints failed assertions of a non-zero rank, so they are not lost.
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestStart(const testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  // Called with gtest's lock held: must not call back into UnitTest.
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILED %s at %s:%d\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.summary());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

int main(int argc, char** argv) {
  tessel::MpiRuntime& mpi = tessel::MpiRuntime::instance();
  mpi.init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  const int rank = mpi.world_rank();
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  float failed = RUN_ALL_TESTS() != 0 ? 1.0f : 0.0f;
  std::unique_ptr<tessel::Communicator> world = mpi.world("test_main");
  world->all_reduce(&failed, 1, tessel::ReduceKind::kSum, "ranks_failed");
  if (failed != 0 && rank == 0) {
    std::fprintf(stderr, "tessel_mpi_tests: %d of %d ranks failed (see the [rank N] lines)\n",
                 static_cast<int>(failed), mpi.world_size());
  }
  return failed != 0 ? 1 : 0;
}
