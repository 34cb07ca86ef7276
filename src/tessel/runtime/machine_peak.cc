#include "tessel/runtime/machine_peak.h"

#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <string>

#include "tessel/base/bf16.h"
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

// Defines `float name(int64_t chunks, float a, float b)` for the ISA `isa`:
// runs `chunks` chunks of kAccumulators independent chains of
// acc = step(acc, va, vb) on `Vec` registers of `lanes` floats, the operands
// va and vb made by `operand` from a and b; returns the sum of every lane of
// every accumulator, so the work cannot be discarded. (A macro: the target
// attribute cannot be a template parameter.)
// clang-format off
#define TS_DEFINE_CHAINS(name, isa, Vec, lanes, set1, add, store, operand, step)          \
  __attribute__((target(isa))) float name(int64_t chunks, float a, float b) {             \
    Vec acc[kAccumulators];                                                               \
    for (int i = 0; i < kAccumulators; ++i) acc[i] = set1(0.01f * static_cast<float>(i)); \
    const auto va = operand(a), vb = operand(b);                                          \
    for (int64_t c = 0; c < chunks; ++c) {                                                \
      for (int64_t it = 0; it < kChunk; ++it) {                                           \
        _Pragma("GCC unroll 12")                                                          \
        for (int i = 0; i < kAccumulators; ++i) acc[i] = step(acc[i], va, vb);            \
      }                                                                                   \
    }                                                                                     \
    Vec sum = acc[0];                                                                     \
    for (int i = 1; i < kAccumulators; ++i) sum = add(sum, acc[i]);                       \
    alignas(sizeof(Vec)) float sums[lanes];                                               \
    store(sums, sum);                                                                     \
    float total = 0;                                                                      \
    for (float v : sums) total += v;                                                      \
    return total;                                                                         \
  }
// clang-format on

// f32 FMAs, 8 lanes (AVX2) and 16 (AVX-512, for CPUs that have it: chosen at
// run time; the build may target any x86-64).
TS_DEFINE_CHAINS(fma_chunks_avx2, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_add_ps,
                 _mm256_store_ps, _mm256_set1_ps, _mm256_fmadd_ps)
TS_DEFINE_CHAINS(fma_chunks_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_add_ps,
                 _mm512_store_ps, _mm512_set1_ps, _mm512_fmadd_ps)

// AVX512-BF16 dot products (vdpbf16ps): each lane adds two bf16 products to
// an f32 accumulator, 64 flops per instruction. The accumulators grow by
// 2ab per step from small values: no overflow, no denormals.
__attribute__((target("avx512f,avx512bf16"))) inline __m512bh bf16_pairs(float x) {
  return _mm512_cvtne2ps_pbh(_mm512_set1_ps(x), _mm512_set1_ps(x));
}
TS_DEFINE_CHAINS(dpbf16_chunks, "avx512f,avx512bf16", __m512, 16, _mm512_set1_ps, _mm512_add_ps,
                 _mm512_store_ps, bf16_pairs, _mm512_dpbf16_ps)
#undef TS_DEFINE_CHAINS

// AMX-BF16 tile products (tdpbf16ps): each multiplies a 16 x 32 bf16 tile by a
// 32 x 16 one (as 16 rows of bf16 pairs) into a 16 x 16 f32 tile, 16 * 16 *
// 32 products and sums, 16384 flops per instruction. Four accumulator tiles
// (tmm0-3) over two A tiles (tmm4-5) and two B tiles (tmm6-7) keep four
// independent chains in flight. Operands are small constants: no overflow, no
// denormals. Each call loads its own tile configuration (per thread) and
// releases the tiles before returning.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};
constexpr int64_t kAmxFlopsPerTileProduct = 16 * 16 * 32 * 2;
constexpr int kAmxChains = 4;

__attribute__((target("amx-tile,amx-bf16"))) float amx_chunks(int64_t chunks, float a, float b) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = 16;
    config.bytes_per_row[t] = 64;
  }
  alignas(64) uint16_t operand_a[16 * 32], operand_b[16 * 32];
  alignas(64) float result[16 * 16];
  std::fill(std::begin(operand_a), std::end(operand_a), f32_to_bf16_bits(a));
  std::fill(std::begin(operand_b), std::end(operand_b), f32_to_bf16_bits(b));
  _tile_loadconfig(&config);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand_a, 64);
  _tile_loadd(5, operand_a, 64);
  _tile_loadd(6, operand_b, 64);
  _tile_loadd(7, operand_b, 64);
  for (int64_t c = 0; c < chunks; ++c) {
    for (int64_t it = 0; it < kChunk / 16; ++it) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  float total = 0;
  _tile_stored(0, result, 64);
  for (float v : result) total += v;
  _tile_stored(3, result, 64);
  for (float v : result) total += v;
  _tile_release();
  return total;
}

// Linux hands out the AMX tile state only to processes that ask for it
// (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); oneDNN asks the same way.
// True where the kernel granted it (once per process; asking again is
// harmless).
bool amx_tiles_usable() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  static const bool granted = __builtin_cpu_supports("amx-bf16") &&
                              syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return granted;
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

// Runs `chunk(chunks, a, b)` on `threads` threads for about `seconds` in 4
// trials; `flops_per_chunk` is the work of one chunk. Returns the best trial.
double measure(int threads, double seconds, float (*chunk)(int64_t, float, float),
               double flops_per_chunk, float a, float b) {
  const double trial_seconds = seconds / kTrials;
  std::atomic<int64_t> trial_chunks{0};
  double best_gflops = 0;
  float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    sink += chunk(4, a, b);  // Warm up: let clocks and the vector units ramp.
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
      // At least one chunk each: on a loaded machine a thread may first run
      // after the trial's time is up, and a rate of 0 would be no measurement.
      int64_t chunks = 0;
      do {
        sink += chunk(1, a, b);
        ++chunks;
      } while (omp_get_wtime() - start < trial_seconds);
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

void check_args(const char* what, int threads, double seconds) {
  if (threads < 1) TS_THROW(what, ": threads must be >= 1, got ", threads);
  if (!(seconds > 0)) TS_THROW(what, ": seconds must be > 0, got ", seconds);
}

}  // namespace

std::string fma_probe_isa() {
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "avx2";
  return "scalar";
}

std::string bf16_probe_isa() {
  if (amx_tiles_usable()) return "amx_bf16";
  if (__builtin_cpu_supports("avx512bf16")) return "avx512_bf16";
  return fma_probe_isa();
}

double measure_fma_peak_gflops(int threads, double seconds) {
  check_args("measure_fma_peak_gflops", threads, seconds);
  // Read through volatiles so the compiler cannot fold the chains. The chain
  // x <- 0.9999999 x + 1e-7 converges to 1: no overflow, no denormals.
  volatile float va = 0.9999999f, vb = 1e-7f;
  const std::string isa = fma_probe_isa();
  const int lanes = isa == "avx512f" ? 16 : isa == "avx2" ? 8 : 1;
  auto* chunk = isa == "avx512f" ? fma_chunks_avx512
                : isa == "avx2"  ? fma_chunks_avx2
                                 : fma_chunks_scalar;
  return measure(threads, seconds, chunk, static_cast<double>(kChunk) * kAccumulators * lanes * 2.0,
                 va, vb);
}

double measure_bf16_peak_gflops(int threads, double seconds) {
  check_args("measure_bf16_peak_gflops", threads, seconds);
  const std::string isa = bf16_probe_isa();
  if (isa == "amx_bf16")
    return measure(threads, seconds, amx_chunks,
                   static_cast<double>(kChunk / 16) * kAmxChains * kAmxFlopsPerTileProduct, 1.0f,
                   1e-6f);
  if (isa != "avx512_bf16") return measure_fma_peak_gflops(threads, seconds);
  volatile float va = 1.0f, vb = 1e-6f;
  return measure(threads, seconds, dpbf16_chunks,
                 static_cast<double>(kChunk) * kAccumulators * 16 * 2 * 2.0, va, vb);
}

}  // namespace tessel
