#include "tessel/kernels/reduce.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/kernels/fast_math.h"
#include "tessel/kernels/max_rank.h"
#include "tessel/kernels/partition.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

constexpr int64_t kReduceTile = 512;  // columns held in one stack accumulator
constexpr int64_t kNarrow = 64;       // rows this narrow reduce by row chunks
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The dims of x after dropping size-1 dims and merging neighbours with the same
// reduced flag: alternating kept / reduced groups, contiguous row-major.
struct Groups {
  int count = 0;
  int64_t size[kMaxRank];
  bool reduced[kMaxRank];
  int64_t stride[kMaxRank];  // element stride in x
  int64_t numel = 1;
  int64_t kept_numel = 1;     // elements of y
  int64_t reduced_numel = 1;  // elements reduced into each y element
};

Groups group_dims(const int64_t* sizes, int rank, const bool* reduced) {
  TS_CHECK(rank >= 0 && rank <= kMaxRank, "rank ", rank, " outside [0, ", kMaxRank, "]");
  Groups g;
  for (int d = 0; d < rank; ++d) {
    TS_CHECK(sizes[d] >= 0, "negative size ", sizes[d], " at dim ", d);
    g.numel *= sizes[d];
    (reduced[d] ? g.reduced_numel : g.kept_numel) *= sizes[d];
  }
  for (int d = 0; d < rank; ++d) {
    if (sizes[d] == 1) continue;
    if (g.count > 0 && g.reduced[g.count - 1] == reduced[d]) {
      g.size[g.count - 1] *= sizes[d];
    } else {
      g.size[g.count] = sizes[d];
      g.reduced[g.count] = reduced[d];
      ++g.count;
    }
  }
  int64_t stride = 1;
  for (int k = g.count - 1; k >= 0; --k) {
    g.stride[k] = stride;
    stride *= g.size[k];
  }
  return g;
}

// Views the grouped dims as (outer, red, inner) with at most one reduced group in
// the middle. Returns false when the pattern needs the generic path.
bool as_3d(const Groups& g, int64_t* outer, int64_t* red, int64_t* inner) {
  *outer = *red = *inner = 1;
  int k = 0;
  if (k < g.count && !g.reduced[k]) *outer = g.size[k++];
  if (k < g.count && g.reduced[k]) *red = g.size[k++];
  if (k < g.count && !g.reduced[k]) *inner = g.size[k++];
  return k == g.count;
}

// max that lets NaN win: once acc is NaN it stays NaN.
inline float max_nan(float acc, float v) { return blend(v > acc || v != v, v, acc); }

float row_max_nan(const float* x, int64_t n) {
  float acc[kRowLanes];
  for (int k = 0; k < kRowLanes; ++k) acc[k] = kNegInf;
  int64_t i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
#pragma omp simd
    for (int k = 0; k < kRowLanes; ++k) acc[k] = max_nan(acc[k], x[i + k]);
  }
  for (int k = 0; i < n; ++i, ++k) acc[k] = max_nan(acc[k], x[i]);
  float m = acc[0];
  for (int k = 1; k < kRowLanes; ++k) m = max_nan(m, acc[k]);
  return m;
}

inline float reduce_row(ReduceOp op, const float* x, int64_t n) {
  return op == ReduceOp::kMax ? row_max_nan(x, n) : row_sum(x, n);
}

// acc (w) op= row (w)
inline void accumulate(ReduceOp op, float* acc, const float* row, int64_t w) {
  if (op == ReduceOp::kMax) {
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) acc[i] = max_nan(acc[i], row[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < w; ++i) acc[i] += row[i];
  }
}

// y (w) /= count: a mean's sums to means.
inline void divide(float* y, int64_t w, float count) {
#pragma omp simd
  for (int64_t i = 0; i < w; ++i) y[i] /= count;
}

// x (outer, red, inner) -> y (outer, inner)
void reduce_3d(ReduceOp op, const float* x, int64_t outer, int64_t red, int64_t inner, float* y) {
  const bool mean = op == ReduceOp::kMean;
  const float count = static_cast<float>(red);
  const int64_t work = outer * red * inner;
  if (inner == 1 && outer == 1) {
    // One long row: fixed chunks, partials combined in chunk order.
    const int64_t chunks = num_chunks(red, kParallelGrain / 4);
    float partial[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = chunk_begin(c, chunks, red), end = chunk_begin(c + 1, chunks, red);
      partial[c] = reduce_row(op, x + begin, end - begin);
    }
    float total = partial[0];
    for (int64_t c = 1; c < chunks; ++c)
      total = op == ReduceOp::kMax ? max_nan(total, partial[c]) : total + partial[c];
    y[0] = mean ? total / count : total;
  } else if (inner == 1) {
    // Reduced dims trailing: one row per output element.
#pragma omp parallel for schedule(static) if (work > kParallelGrain)
    for (int64_t o = 0; o < outer; ++o) {
      const float v = reduce_row(op, x + o * red, red);
      y[o] = mean ? v / count : v;
    }
  } else if (outer == 1 && inner <= kNarrow) {
    // Reduced dims leading, narrow rows: fixed row chunks, partials in a shared stack
    // array, folded in chunk order afterwards.
    const int64_t chunks = num_chunks(red, std::max<int64_t>(1, 4096 / inner));
    float partial[kMaxChunks * kNarrow];
#pragma omp parallel for schedule(static) if (chunks > 1 && work > kParallelGrain)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = chunk_begin(c, chunks, red), end = chunk_begin(c + 1, chunks, red);
      float* part = partial + c * inner;
      std::copy(x + begin * inner, x + (begin + 1) * inner, part);
      for (int64_t r = begin + 1; r < end; ++r) accumulate(op, part, x + r * inner, inner);
    }
    std::copy(partial, partial + inner, y);
    for (int64_t c = 1; c < chunks; ++c) accumulate(op, y, partial + c * inner, inner);
    if (mean) divide(y, inner, count);
  } else if (outer == 1) {
    // Reduced dims leading, wide rows (e.g. a bias gradient): threads split the
    // columns; every column is summed over all rows in the same fixed order (blocks
    // of kFoldRowBlock rows folded into a running total), whatever the split.
#pragma omp parallel if (work > kParallelGrain)
    {
      const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
      const int64_t groups = (inner + 7) / 8;  // split on 8-column boundaries
      const int64_t lo = std::min(inner, 8 * chunk_begin(thread, threads, groups));
      const int64_t hi = std::min(inner, 8 * chunk_begin(thread + 1, threads, groups));
      for (int64_t c0 = lo; c0 < hi; c0 += kReduceTile) {
        const int64_t w = std::min(kReduceTile, hi - c0);
        float* yt = y + c0;
        float part[kReduceTile];
        for (int64_t b = 0; b < red; b += kFoldRowBlock) {
          const int64_t end = std::min(red, b + kFoldRowBlock);
          std::copy(x + b * inner + c0, x + b * inner + c0 + w, part);
          for (int64_t r = b + 1; r < end; ++r) accumulate(op, part, x + r * inner + c0, w);
          if (b == 0) {
            std::copy(part, part + w, yt);
          } else {
            accumulate(op, yt, part, w);
          }
        }
        if (mean) divide(yt, w, count);
      }
    }
  } else {
    // Reduced dims in the middle: each (outer, tile) sums its rows sequentially.
    const int64_t tiles = (inner + kReduceTile - 1) / kReduceTile;
#pragma omp parallel for schedule(static) if (work > kParallelGrain)
    for (int64_t it = 0; it < outer * tiles; ++it) {
      const int64_t o = it / tiles, c0 = (it % tiles) * kReduceTile,
                    w = std::min(kReduceTile, inner - c0);
      const float* xo = x + o * red * inner + c0;
      float* yt = y + o * inner + c0;
      std::copy(xo, xo + w, yt);
      for (int64_t r = 1; r < red; ++r) accumulate(op, yt, xo + r * inner, w);
      if (mean) divide(yt, w, count);
    }
  }
}

// Element offsets in x of y element `o` (kept groups) - the base of its reduced set.
int64_t kept_offset(const Groups& g, int64_t o) {
  int64_t offset = 0;
  for (int k = g.count - 1; k >= 0; --k) {
    if (g.reduced[k]) continue;
    offset += (o % g.size[k]) * g.stride[k];
    o /= g.size[k];
  }
  return offset;
}

// Calls f(offset) for the offsets of the reduced set relative to its base, in
// row-major order; stops early when f returns false.
template <typename F>
void for_each_reduced(const Groups& g, F f) {
  int dims[kMaxRank];
  int count = 0;
  for (int k = 0; k < g.count; ++k)
    if (g.reduced[k]) dims[count++] = k;
  int64_t index[kMaxRank] = {};
  int64_t offset = 0;
  for (int64_t i = 0; i < g.reduced_numel; ++i) {
    if (!f(offset)) return;
    for (int j = count - 1; j >= 0; --j) {
      const int k = dims[j];
      offset += g.stride[k];
      if (++index[j] < g.size[k]) break;
      offset -= index[j] * g.stride[k];
      index[j] = 0;
    }
  }
}

inline bool max_matches(float xv, float yv) { return xv == yv || (yv != yv && xv != xv); }

// Shared input checks; returns false when there is nothing to compute.
bool handle_empty(ReduceOp op, const Groups& g, float* y) {
  if (g.numel > 0) return true;
  if (g.kept_numel > 0) {
    if (op == ReduceOp::kMax) TS_THROW("reduce max over an empty set of elements");
    const float fill = op == ReduceOp::kSum ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    std::fill(y, y + g.kept_numel, fill);
  }
  return false;
}

// The reference twins' y index of x element i: its kept coordinates, row-major.
int64_t kept_index(int64_t i, const int64_t* sizes, int rank, const bool* reduced) {
  int64_t yi = 0, ystride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t index = i % sizes[d];
    i /= sizes[d];
    if (!reduced[d]) {
      yi += index * ystride;
      ystride *= sizes[d];
    }
  }
  return yi;
}

}  // namespace

void reduce(ReduceOp op, const float* x, const int64_t* sizes, int rank, const bool* reduced,
            float* y) {
  const Groups g = group_dims(sizes, rank, reduced);
  if (!handle_empty(op, g, y)) return;
  int64_t outer, red, inner;
  if (as_3d(g, &outer, &red, &inner)) return reduce_3d(op, x, outer, red, inner, y);
  // Generic: several separated reduced groups. One output element per iteration.
  const float count = static_cast<float>(g.reduced_numel);
#pragma omp parallel for schedule(static) if (g.numel > kParallelGrain)
  for (int64_t o = 0; o < g.kept_numel; ++o) {
    const float* base = x + kept_offset(g, o);
    float acc = op == ReduceOp::kMax ? kNegInf : 0.0f;
    for_each_reduced(g, [&](int64_t off) {
      acc = op == ReduceOp::kMax ? max_nan(acc, base[off]) : acc + base[off];
      return true;
    });
    y[o] = op == ReduceOp::kMean ? acc / count : acc;
  }
}

void reduce_ref(ReduceOp op, const float* x, const int64_t* sizes, int rank, const bool* reduced,
                float* y) {
  int64_t numel = 1, kept = 1, count = 1;
  for (int d = 0; d < rank; ++d) {
    numel *= sizes[d];
    (reduced[d] ? count : kept) *= sizes[d];
  }
  if (op == ReduceOp::kMax && count == 0 && kept > 0)
    TS_THROW("reduce max over an empty set of elements");
  std::vector<double> acc(kept, op == ReduceOp::kMax ? -INFINITY : 0.0);
  for (int64_t i = 0; i < numel; ++i) {
    const int64_t yi = kept_index(i, sizes, rank, reduced);
    const double v = x[i];
    if (op == ReduceOp::kMax) {
      if (std::isnan(v) || v > acc[yi]) acc[yi] = v;
    } else {
      acc[yi] += v;
    }
  }
  for (int64_t o = 0; o < kept; ++o)
    y[o] = static_cast<float>(op == ReduceOp::kMean ? acc[o] / count : acc[o]);
}

void reduce_max_backward(const float* x, const float* y, const float* dy, const int64_t* sizes,
                         int rank, const bool* reduced, float* dx) {
  const Groups g = group_dims(sizes, rank, reduced);
  if (g.numel == 0) return;
  int64_t outer, red, inner;
  if (as_3d(g, &outer, &red, &inner)) {
    if (inner == 1) {
#pragma omp parallel for schedule(static) if (g.numel > kParallelGrain)
      for (int64_t o = 0; o < outer; ++o) {
        const float* xr = x + o * red;
        float* dxr = dx + o * red;
        int64_t first = 0;
        while (first < red && !max_matches(xr[first], y[o])) ++first;
        std::fill(dxr, dxr + red, 0.0f);
        if (first < red) dxr[first] = dy[o];
      }
    } else {
      // Column tiles: walk the reduced rows once, marking columns already served.
      const int64_t tiles = (inner + kReduceTile - 1) / kReduceTile;
#pragma omp parallel for schedule(static) if (g.numel > kParallelGrain)
      for (int64_t it = 0; it < outer * tiles; ++it) {
        const int64_t o = it / tiles, c0 = (it % tiles) * kReduceTile,
                      w = std::min(kReduceTile, inner - c0);
        const float* yt = y + o * inner + c0;
        const float* dyt = dy + o * inner + c0;
        int32_t done[kReduceTile] = {};
        for (int64_t r = 0; r < red; ++r) {
          const int64_t offset = (o * red + r) * inner + c0;
          const float* xr = x + offset;
          float* dxr = dx + offset;
#pragma omp simd
          for (int64_t i = 0; i < w; ++i) {
            const bool hit = done[i] == 0 && max_matches(xr[i], yt[i]);
            dxr[i] = blend(hit, dyt[i], 0.0f);
            done[i] |= static_cast<int32_t>(hit);
          }
        }
      }
    }
    return;
  }
  // Generic: zero, then one output element per iteration finds its first max.
#pragma omp parallel for simd schedule(simd : static) if (g.numel > kParallelGrain)
  for (int64_t i = 0; i < g.numel; ++i) dx[i] = 0.0f;
#pragma omp parallel for schedule(static) if (g.numel > kParallelGrain)
  for (int64_t o = 0; o < g.kept_numel; ++o) {
    const int64_t base = kept_offset(g, o);
    for_each_reduced(g, [&](int64_t off) {
      if (!max_matches(x[base + off], y[o])) return true;
      dx[base + off] = dy[o];
      return false;
    });
  }
}

void reduce_max_backward_ref(const float* x, const float* y, const float* dy, const int64_t* sizes,
                             int rank, const bool* reduced, float* dx) {
  int64_t numel = 1, kept = 1;
  for (int d = 0; d < rank; ++d) {
    numel *= sizes[d];
    if (!reduced[d]) kept *= sizes[d];
  }
  std::vector<bool> served(kept, false);
  for (int64_t i = 0; i < numel; ++i) {
    const int64_t yi = kept_index(i, sizes, rank, reduced);
    const bool is_max = x[i] == y[yi] || (std::isnan(y[yi]) && std::isnan(x[i]));
    if (is_max && !served[yi]) {
      dx[i] = dy[yi];
      served[yi] = true;
    } else {
      dx[i] = 0.0f;
    }
  }
}

}  // namespace tessel::kernels
