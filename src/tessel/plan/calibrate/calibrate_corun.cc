#include "tessel/plan/calibrate/calibrate_corun.h"

#include <time.h>

#include <algorithm>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/plan/calibrate/instruction_timing.h"
#include "tessel/plan/profile/kernel_rates.h"

namespace tessel::plan {
namespace {

double median(std::vector<double> v) {
  TS_CHECK(!v.empty(), "co-run calibration: no timed runs");
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Sleeps until steady-clock time `until` without calling MPI (the core idles).
void sleep_until(double until) {
  for (double left = until - steady_seconds(); left > 0; left = until - steady_seconds()) {
    timespec ts{static_cast<time_t>(left), static_cast<long>((left - double(time_t(left))) * 1e9)};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace

CoRun measure_co_run(Communicator& world, const std::function<void()>& barrier, bool quick) {
  TS_CHECK(world.size() == 2, "measure_co_run needs 2 ranks, got ", world.size());
  const int rank = world.rank();
  const std::unique_ptr<TimedProgram> timed = timed_training_program(kernel_rate_config(quick));
  Program& program = *timed->program;
  auto run_once = [&] {
    const double t0 = steady_seconds();
    program.run();
    return steady_seconds() - t0;
  };
  const int rounds = quick ? 2 : 3, per_round = 2;
  std::vector<double> alone, polling, computing;

  // Warm-up, both ranks, and the longest run either saw: rank 1's sleep
  // while rank 0 runs alone is sized from it.
  barrier();
  float longest = static_cast<float>(std::max(run_once(), run_once()));
  world.all_reduce(&longest, 1, ReduceKind::kMax, "calibrate co-run");

  int tag = 300;
  for (int round = 0; round < rounds; ++round) {
    // Alone: rank 1 sleeps (no MPI call) for twice the longest run per run;
    // a run of rank 0 that ends after that (rank 1 polling in the barrier
    // by then) is not counted.
    barrier();
    const double deadline = steady_seconds() + 2.0 * per_round * longest + 0.02;
    if (rank == 0) {
      for (int i = 0; i < per_round; ++i) {
        const double t = run_once();
        if (steady_seconds() < deadline) alone.push_back(t);
      }
    } else {
      sleep_until(deadline);
    }
    // Polling: rank 1 waits in a blocking receive, as a pipeline rank waits
    // for its next input, until rank 0 has run.
    barrier();
    float token = 0;
    ++tag;
    if (rank == 0) {
      for (int i = 0; i < per_round; ++i) polling.push_back(run_once());
      world.start_send(&token, 1, 1, tag, "calibrate co-run")->wait();
    } else {
      world.recv(&token, 1, 0, tag, "calibrate co-run");
    }
    // Computing: both run the program at once.
    barrier();
    for (int i = 0; i < per_round; ++i) {
      const double t = run_once();
      if (rank == 0) computing.push_back(t);
    }
  }
  barrier();
  // Rank 0's figures, to both ranks.
  float ratios[2] = {0, 0};
  if (rank == 0) {
    if (alone.empty())
      TS_THROW("co-run calibration: every run alone outlasted the other rank's sleep of ",
               2.0 * per_round * longest, " s");
    const double a = median(alone), p = median(polling), c = median(computing);
    ratios[0] = static_cast<float>(p / a);
    ratios[1] = static_cast<float>(c / a);
  }
  world.all_reduce(ratios, 2, ReduceKind::kMax, "calibrate co-run");
  return {.ranks = 2, .computing = ratios[1], .polling = ratios[0]};
}

}  // namespace tessel::plan
