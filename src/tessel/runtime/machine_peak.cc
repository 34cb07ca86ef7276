#include "tessel/runtime/machine_peak.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "tessel/base/error.h"

namespace tessel {
namespace {

// Iterations of the inner loop between clock checks.
constexpr int64_t kChunk = 1 << 14;
// Independent accumulators: Zen 3 has 2 FMA pipes with 4-cycle latency, so at
// least 8 chains are in flight; 12 leaves headroom for other cores' latencies.
constexpr int kAccumulators = 12;
// The measurement is split into trials and the best is reported: on a shared
// or virtualised host a trial can lose its core to another tenant, and the
// probe is after what the hardware can deliver.
constexpr int kTrials = 4;

volatile float g_sink;

// Runs `chunks` chunks of kAccumulators * 8-lane FMAs; returns a value that
// depends on every accumulator so the work cannot be discarded.
__attribute__((target("avx2,fma"))) float fma_chunks_avx2(int64_t chunks, float a, float b) {
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(0.01f * static_cast<float>(i));
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t it = 0; it < kChunk; ++it) {
#pragma GCC unroll 12
      for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_fmadd_ps(acc[i], va, vb);
    }
  }
  __m256 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm256_add_ps(sum, acc[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

float fma_chunks_scalar(int64_t chunks, float a, float b) {
  float acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.01f * static_cast<float>(i);
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t it = 0; it < kChunk; ++it)
      for (int i = 0; i < kAccumulators; ++i) acc[i] = acc[i] * a + b;
  float total = 0;
  for (float v : acc) total += v;
  return total;
}

}  // namespace

double measure_fma_peak_gflops(int threads, double seconds) {
  if (threads < 1) TS_THROW("measure_fma_peak_gflops: threads must be >= 1, got ", threads);
  if (!(seconds > 0)) TS_THROW("measure_fma_peak_gflops: seconds must be > 0, got ", seconds);
  const bool has_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const int lanes = has_fma ? 8 : 1;
  const double flops_per_chunk = static_cast<double>(kChunk) * kAccumulators * lanes * 2.0;
  const double trial_seconds = seconds / kTrials;
  // Read through volatiles so the compiler cannot fold the chains. The chain
  // x <- 0.9999999 x + 1e-7 converges to 1: no overflow, no denormals.
  volatile float va = 0.9999999f, vb = 1e-7f;
  const float a = va, b = vb;

  std::atomic<int64_t> trial_chunks{0};
  double best_gflops = 0;
  float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    auto run = [&](int64_t chunks) {
      return has_fma ? fma_chunks_avx2(chunks, a, b) : fma_chunks_scalar(chunks, a, b);
    };
    sink += run(4);  // Warm up: let clocks and the vector units ramp.
    for (int trial = 0; trial < kTrials; ++trial) {
      double start = 0;
#pragma omp barrier
#pragma omp single copyprivate(start)
      {
        trial_chunks.store(0);
        start = omp_get_wtime();
      }
      // Each thread runs for the trial's duration; work is counted per thread
      // and the rate is total work over the wall time until the last finishes.
      int64_t chunks = 0;
      while (omp_get_wtime() - start < trial_seconds) {
        sink += run(1);
        ++chunks;
      }
      trial_chunks.fetch_add(chunks);
#pragma omp barrier
#pragma omp master
      {
        const double elapsed = omp_get_wtime() - start;
        best_gflops = std::max(best_gflops, trial_chunks.load() * flops_per_chunk / elapsed / 1e9);
      }
    }
  }
  g_sink = sink;
  return best_gflops;
}

}  // namespace tessel
