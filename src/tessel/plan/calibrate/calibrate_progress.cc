#include "tessel/plan/calibrate/calibrate_progress.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/plan/calibrate/collective_timing.h"

namespace tessel::plan {
namespace {

double upper_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A compute chunk: `reps` passes of a multiply-add over an L2-sized array.
class Chunk {
 public:
  Chunk() : data_(32 * 1024, 1.0f) {}
  void run(int reps) {
    for (int r = 0; r < reps; ++r)
      for (float& x : data_) x = x * 0.999f + 0.001f;
    sink_ += data_[r_++ % data_.size()];
  }
  float sink() const { return sink_; }

 private:
  std::vector<float> data_;
  size_t r_ = 0;
  float sink_ = 0;
};

// The chunk repetitions that take about `seconds`, agreed by both ranks
// (the larger count, so both run the same work).
int reps_for(Chunk& chunk, double seconds, Communicator& world) {
  chunk.run(1);
  double best = 1e9;
  for (int i = 0; i < 5; ++i) {
    const double t0 = steady_seconds();
    chunk.run(1);
    best = std::min(best, steady_seconds() - t0);
  }
  float reps = static_cast<float>(std::max(1.0, std::ceil(seconds / std::max(best, 1e-9))));
  world.all_reduce(&reps, 1, ReduceKind::kMax, "calibrate progress");
  return static_cast<int>(reps);
}

struct PolledRun {
  double seconds = 0;  // start to completion, the wait included
  double polls = 0;    // tests until it completed (estimated when the wait finished it)
};

// Starts a request with `start` (null: nothing), runs `chunks` chunks with a
// test before each until it completes, then waits.
PolledRun polled_run(const std::function<std::unique_ptr<CommRequest>()>& start, Chunk& chunk,
                     int reps, int chunks, bool poll) {
  const double t0 = steady_seconds();
  std::unique_ptr<CommRequest> request = start ? start() : nullptr;
  bool done = !request;
  int polls = 0;
  for (int c = 0; c < chunks; ++c) {
    if (!done && poll) {
      ++polls;
      done = request->test();
    }
    chunk.run(reps);
  }
  const double t1 = steady_seconds();
  if (request) request->wait();
  const double seconds = steady_seconds() - t0;
  // Not finished by the tests: the wait's time, negated.
  return {seconds, request && !done ? -(steady_seconds() - t1) : polls};
}

double clamp01(double x) { return std::min(1.0, std::max(0.0, x)); }

}  // namespace

CommProgress measure_progress(Communicator& world, const std::function<void()>& barrier,
                              bool quick) {
  TS_CHECK(world.size() == 2, "measure_progress needs 2 ranks, got ", world.size());
  const int64_t bytes = quick ? (4 << 20) : (8 << 20);
  const int64_t floats = bytes / 4;
  const int rank = world.rank();
  std::vector<float> buffer(floats, 1.0f);
  Chunk chunk;
  const int reps = reps_for(chunk, 0.25e-3, world);
  const int runs = 3;

  auto all_reduce = [&] {
    return world.start_all_reduce(buffer.data(), floats, "calibrate progress");
  };
  int tag = 100;
  auto send = [&]() -> std::unique_ptr<CommRequest> {
    ++tag;
    if (rank == 0) return world.start_send(buffer.data(), floats, 1, tag, "calibrate progress");
    world.recv(buffer.data(), floats, 0, tag, "calibrate progress");
    return nullptr;
  };
  auto timed = [&](const std::function<void()>& fn) { return median_seconds(barrier, runs, fn); };
  const double a = timed([&] { all_reduce()->wait(); });
  const double b = timed(
      [&] { world.all_reduce(buffer.data(), floats, ReduceKind::kSum, "calibrate progress"); });
  const double a_send = timed([&] {
    if (auto r = send()) r->wait();
  });
  // Enough chunks that the tests can finish the transfer: 4x its time alone.
  const int chunks =
      std::clamp(static_cast<int>(std::ceil(4 * std::max(a, a_send) / 0.25e-3)), 16, 4000);
  const double c = timed([&] { polled_run(nullptr, chunk, reps, chunks, false); });

  auto measure = [&](const std::function<std::unique_ptr<CommRequest>()>& start, double alone,
                     double* overlap, double* poll_bytes) {
    std::vector<double> seconds, polls;
    barrier();
    polled_run(start, chunk, reps, chunks, true);  // warm-up
    for (int i = 0; i < runs; ++i) {
      barrier();
      const PolledRun r = polled_run(start, chunk, reps, chunks, true);
      seconds.push_back(r.seconds);
      // Unfinished after every test: the tests did the share of the
      // transfer the wait did not.
      polls.push_back(r.polls >= 0 ? std::max(1.0, r.polls)
                                   : chunks / std::max(0.02, 1 - (-r.polls) / alone));
    }
    *overlap = clamp01((c + alone - upper_median(seconds)) / alone);
    *poll_bytes = static_cast<double>(bytes) / upper_median(polls);
  };
  CommProgress p;
  p.mode = CommProgress::Mode::kPolled;
  p.nonblocking_factor = b > 0 ? a / b : 1;
  measure(all_reduce, a, &p.all_reduce_overlap, &p.all_reduce_poll_bytes);
  measure(send, a_send, &p.send_overlap, &p.send_poll_bytes);
  if (chunk.sink() == 12345.0f) p.send_overlap = clamp01(p.send_overlap);  // keep the work
  return p;
}

}  // namespace tessel::plan
