// The MCA parameters set_open_mpi_defaults() sets before MPI starts are the
// ones Open MPI runs with: read back through MPI's tool interface (MPI_T)
// after MpiRuntime::init, the value is ours, or the user's where the
// environment set it before launch. Gradient buckets' non-blocking
// all-reduces (correct results: comm_mpi_test.cc) then use it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <optional>

#include "tessel/comm/mpi/mpi_runtime.h"

namespace tessel {
namespace {

// An integer MCA parameter's value as MPI reports it; none if MPI has no
// such control variable (another MPI, or a build without libnbc).
std::optional<int> integer_control_variable(const char* name) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return std::nullopt;
  std::optional<int> value;
  int index = -1;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS) {
    MPI_T_cvar_handle handle;
    int count = 0;
    int v = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      if (count == 1 && MPI_T_cvar_read(handle, &v) == MPI_SUCCESS) value = v;
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return value;
}

TEST(OpenMpiDefaults, NonBlockingAllReduceUsesReduceScatterAllGather) {
  ASSERT_TRUE(MpiRuntime::instance().initialized());
  const std::optional<int> algorithm = integer_control_variable("coll_libnbc_iallreduce_algorithm");
  if (!algorithm) GTEST_SKIP() << "this MPI has no coll_libnbc_iallreduce_algorithm";
  const char* preset = std::getenv("TESSEL_TEST_PRESET_IALLREDUCE_ALGORITHM");
  EXPECT_EQ(*algorithm, preset ? std::atoi(preset) : 3)
      << "Open MPI's non-blocking all-reduce algorithm (3: reduce-scatter, then all-gather)";
}

}  // namespace
}  // namespace tessel
