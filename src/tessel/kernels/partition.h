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

}  // namespace tessel::kernels
