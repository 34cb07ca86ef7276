#include "tessel/kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>

#include "tessel/base/error.h"
#include "tessel/kernels/partition.h"
#include "tessel/kernels/row_ops.h"

namespace tessel::kernels {
namespace {

void check_inputs(const char* op, const int32_t* labels, int64_t rows, int64_t vocab) {
  if (rows <= 0 || vocab <= 0)
    TS_THROW(op, ": needs rows > 0 and vocab > 0, got rows ", rows, ", vocab ", vocab);
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] < 0 || labels[r] >= vocab)
      TS_THROW(op, ": label ", labels[r], " at row ", r, " is outside [0, ", vocab,
               ") (vocab size ", vocab, ")");
}

}  // namespace

float cross_entropy_forward(const float* logits, const int32_t* labels, int64_t rows,
                            int64_t vocab) {
  check_inputs("cross_entropy_forward", labels, rows, vocab);
  const int64_t chunks = num_chunks(rows, std::max<int64_t>(1, kParallelGrain / 4 / vocab));
  double partial[kMaxChunks];
#pragma omp parallel for schedule(static) if (chunks > 1 && rows * vocab > kParallelGrain)
  for (int64_t c = 0; c < chunks; ++c) {
    double sum = 0.0;
    for (int64_t r = chunk_begin(c, chunks, rows); r < chunk_begin(c + 1, chunks, rows); ++r) {
      const float* xr = logits + r * vocab;
      const float m = row_max(xr, vocab);
      const float s = row_exp_sum(xr, 1.0f, m, vocab);
      sum += std::log(static_cast<double>(s)) + m - xr[labels[r]];
    }
    partial[c] = sum;
  }
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partial[c];
  return static_cast<float>(total / static_cast<double>(rows));
}

float cross_entropy_forward_ref(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t vocab) {
  check_inputs("cross_entropy_forward", labels, rows, vocab);
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * vocab;
    const double m = *std::max_element(xr, xr + vocab);
    double s = 0.0;
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(xr[v] - m);
    total += std::log(s) + m - xr[labels[r]];
  }
  return static_cast<float>(total / static_cast<double>(rows));
}

void cross_entropy_backward(const float* logits, const int32_t* labels, float dloss, float* dlogits,
                            int64_t rows, int64_t vocab) {
  check_inputs("cross_entropy_backward", labels, rows, vocab);
  const float coeff = dloss / static_cast<float>(rows);
#pragma omp parallel for schedule(static) if (rows * vocab > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * vocab;
    float* dr = dlogits + r * vocab;
    // exp(x - max) goes straight into dlogits, then one scaling pass.
    const float m = row_max(xr, vocab);
    const float s = row_exp_sum(xr, 1.0f, m, dr, vocab);
    const float k = coeff / s;
#pragma omp simd
    for (int64_t v = 0; v < vocab; ++v) dr[v] *= k;
    dr[labels[r]] -= coeff;
  }
}

void cross_entropy_backward_ref(const float* logits, const int32_t* labels, float dloss,
                                float* dlogits, int64_t rows, int64_t vocab) {
  check_inputs("cross_entropy_backward", labels, rows, vocab);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = logits + r * vocab;
    const double m = *std::max_element(xr, xr + vocab);
    double s = 0.0;
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(xr[v] - m);
    for (int64_t v = 0; v < vocab; ++v) {
      const double p = std::exp(xr[v] - m) / s;
      const double onehot = v == labels[r] ? 1.0 : 0.0;
      dlogits[r * vocab + v] = static_cast<float>(dloss * (p - onehot) / rows);
    }
  }
}

}  // namespace tessel::kernels
