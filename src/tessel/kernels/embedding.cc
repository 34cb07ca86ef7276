#include "tessel/kernels/embedding.h"

#include <omp.h>

#include <algorithm>

#include "tessel/base/error.h"
#include "tessel/kernels/partition.h"

namespace tessel::kernels {
namespace {

void check_ids(const char* op, const int32_t* ids, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      TS_THROW(op, ": id ", ids[i], " at position ", i, " is outside [0, ", vocab, ") (vocab size ",
               vocab, ")");
}

}  // namespace

void embedding_forward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t vocab,
                       int64_t dim) {
  check_ids("embedding_forward", ids, n, vocab);
#pragma omp parallel for schedule(static) if (n * dim > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const float* src = table + static_cast<int64_t>(ids[i]) * dim;
    std::copy(src, src + dim, out + i * dim);
  }
}

void embedding_forward_ref(const float* table, const int32_t* ids, float* out, int64_t n,
                           int64_t vocab, int64_t dim) {
  check_ids("embedding_forward", ids, n, vocab);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < dim; ++d) out[i * dim + d] = table[ids[i] * dim + d];
  }
}

void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                        int64_t vocab, int64_t dim) {
  check_ids("embedding_backward", ids, n, vocab);
#pragma omp parallel if ((n + vocab) * dim > kParallelGrain)
  {
    // This thread owns table rows [lo, hi): it zeroes them, then scans every id and
    // adds the positions that land in its range, in position order.
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t lo = chunk_begin(thread, threads, vocab);
    const int64_t hi = chunk_begin(thread + 1, threads, vocab);
    std::fill(dtable + lo * dim, dtable + hi * dim, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (id < lo || id >= hi) continue;
      float* dst = dtable + id * dim;
      const float* src = dout + i * dim;
#pragma omp simd
      for (int64_t d = 0; d < dim; ++d) dst[d] += src[d];
    }
  }
}

void embedding_backward_ref(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                            int64_t vocab, int64_t dim) {
  check_ids("embedding_backward", ids, n, vocab);
  std::fill(dtable, dtable + vocab * dim, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t d = 0; d < dim; ++d) dtable[ids[i] * dim + d] += dout[i * dim + d];
  }
}

}  // namespace tessel::kernels
