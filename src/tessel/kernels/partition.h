// How the CPU kernels split work across OpenMP threads.
//
// Elementwise and per-row kernels use static schedules and only go parallel
// above kParallelGrain elements (below it the fork/join costs more than it
// saves). Any reduction across rows must give bitwise identical results for any
// OMP_NUM_THREADS. Two patterns do that without heap scratch:
//  - scalar (or narrow) results: split the range into num_chunks() chunks, a
//    function of the problem size only, keep the partials in a small stack array
//    and add them in chunk order after the parallel loop;
//  - wide vector results (bias/gamma gradients): split the output columns across
//    threads and reduce every column over all rows in one fixed order, so the
//    split cannot matter.
// (No `omp ordered` hand-offs: under CPU oversubscription each one can cost a
// scheduler time slice.)
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace tessel::kernels {

// Minimum number of elements (or element-sized units of work) worth forking for.
inline constexpr int64_t kParallelGrain = int64_t{1} << 15;

// Wide vector results: the rows each column sums before folding the block's
// partial into its running total (the fixed order, whatever the split).
inline constexpr int64_t kFoldRowBlock = 64;

// Upper bound on the chunks of a deterministic reduction (partials fit on the stack).
inline constexpr int64_t kMaxChunks = 64;

// Number of chunks for a deterministic reduction over n items, each chunk holding at
// least min_chunk items where possible: in [1, kMaxChunks], a function of n only.
inline int64_t num_chunks(int64_t n, int64_t min_chunk) {
  return std::clamp<int64_t>((n + min_chunk - 1) / min_chunk, 1, kMaxChunks);
}

// First item of chunk c of `chunks` equal chunks of [0, n); chunk c is [begin(c), begin(c + 1)).
inline int64_t chunk_begin(int64_t c, int64_t chunks, int64_t n) {
  return n / chunks * c + std::min(c, n % chunks);
}

// Wide vector results: kOut outputs of `cols` columns (out[k]), each column a
// sum over `rows` rows. Threads split the columns on 8-column boundaries; each
// column sums its rows in one fixed order (kFoldRowBlock-row blocks folded into
// a running total), so the split, and hence the thread count, cannot change the
// result. add_row(r, c0, w, partial) adds row r's columns [c0, c0 + w) into
// partial[k][0, w) for every output k (kTile columns of partials on the stack).
template <int kOut, int64_t kTile, typename AddRow>
void fold_columns(int64_t rows, int64_t cols, float* const (&out)[kOut], AddRow add_row) {
  if (cols == 0) return;
  if (rows == 0) {
    for (float* o : out) std::fill(o, o + cols, 0.0f);
    return;
  }
#pragma omp parallel if (rows * cols > kParallelGrain)
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t groups = (cols + 7) / 8;
    const int64_t lo = std::min(cols, 8 * chunk_begin(thread, threads, groups));
    const int64_t hi = std::min(cols, 8 * chunk_begin(thread + 1, threads, groups));
    for (int64_t c0 = lo; c0 < hi; c0 += kTile) {
      const int64_t w = std::min(kTile, hi - c0);
      float partial[kOut][kTile];
      for (int64_t b = 0; b < rows; b += kFoldRowBlock) {
        for (float* p : partial) std::fill(p, p + w, 0.0f);
        for (int64_t r = b; r < std::min(rows, b + kFoldRowBlock); ++r) add_row(r, c0, w, partial);
        for (int k = 0; k < kOut; ++k) {
          if (b == 0) {
            std::copy(partial[k], partial[k] + w, out[k] + c0);
          } else {
#pragma omp simd
            for (int64_t c = 0; c < w; ++c) out[k][c0 + c] += partial[k][c];
          }
        }
      }
    }
  }
}

}  // namespace tessel::kernels
