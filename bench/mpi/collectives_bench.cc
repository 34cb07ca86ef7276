// Times the collectives of MpiCommunicator on one buffer size (default: the
// GPT benchmark's 10.8M-float gradient). Run under mpirun; rank 0 prints one
// line per collective with the median time and the bus bandwidth, i.e. the
// bytes a ring algorithm moves per rank over the time (NCCL's convention).
// The timing loop and the calls are the ones `tessel calibrate` uses
// (plan/calibrate/collective_timing.h).
//
//   mpirun -n 2 tessel_collectives_bench [floats=10800000] [iterations=10]
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/plan/calibrate/collective_timing.h"

int main(int argc, char** argv) {
  using tessel::plan::CollectiveKind;
  tessel::MpiRuntime& mpi = tessel::MpiRuntime::instance();
  mpi.init(&argc, &argv);
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 10'800'000;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 10;
  auto world = mpi.world("bench");
  const int p = world->size();
  const int64_t block = n / p;  // per-rank block of the block collectives
  std::vector<float> data(n, 1.0f), out(n, 0.0f);
  auto run = [&](CollectiveKind kind, int64_t floats) {
    return [&, kind, floats] {
      tessel::plan::run_collective(*world, kind, data.data(), out.data(), floats);
    };
  };

  struct Row {
    const char* name;
    double bus_factor;  // bytes moved per rank, in units of the n-float buffer
    std::function<void()> fn;
  };
  const double ring = p > 1 ? double(p - 1) / p : 0.0;
  std::vector<Row> rows = {
      {"all_reduce", 2 * ring, run(CollectiveKind::kAllReduce, n)},
      {"start_all_reduce+wait", 2 * ring,
       [&] { world->start_all_reduce(data.data(), n, "bench")->wait(); }},
      {"all_gather", ring, run(CollectiveKind::kAllGather, block)},
      {"reduce_scatter", ring, run(CollectiveKind::kReduceScatter, block * p)},
      {"all_to_all", ring, run(CollectiveKind::kAllToAll, block * p)},
  };
  if (mpi.world_rank() == 0) {
    std::printf("ranks=%d floats=%lld (%.1f MB) iterations=%d\n", p, static_cast<long long>(n),
                n * 4.0 / 1e6, iterations);
  }
  for (const Row& row : rows) {
    double t = tessel::plan::median_seconds([&] { mpi.barrier(); }, iterations, row.fn);
    if (mpi.world_rank() == 0) {
      std::printf("%-22s %9.2f ms  bus %7.2f GB/s\n", row.name, t * 1e3,
                  t > 0 ? row.bus_factor * n * 4.0 / t / 1e9 : 0.0);
    }
  }
  return 0;
}
