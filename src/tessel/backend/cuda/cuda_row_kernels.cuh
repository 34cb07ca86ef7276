// Part of cuda_kernels.cu (included at its end, one translation unit): the
// row kernels (softmax, LayerNorm, embedding, cross-entropy), dropout and
// the operations between kernels (bf16 rounding, accumulation, the
// optimizer). Row kernels run one thread per row and accumulate in double
// in index order, the formulas of the CPU kernels' `_ref` twins; a first
// cut, correct before fast. Compiled only: not run on a GPU.
#pragma once

namespace tessel::cuda {
namespace {

// Rows of (outer, n, inner): row r = (o, i), element j at (o * n + j) * inner + i.
__global__ void softmax_kernel(const float* x, float* y, int64_t outer, int64_t n, int64_t inner,
                               float scale, int64_t query_size, int64_t query_stride) {
  TS_GRID_LOOP(r, outer * inner) {
    const int64_t o = r / inner, i = r % inner;
    const int64_t limit = query_size > 0 ? min(n, (o / query_stride) % query_size + 1) : n;
    const float* xr = x + o * n * inner + i;
    float* yr = y + o * n * inner + i;
    double m = -INFINITY;
    for (int64_t j = 0; j < limit; ++j) m = fmax(m, static_cast<double>(scale * xr[j * inner]));
    double sum = 0.0;
    for (int64_t j = 0; j < limit; ++j) sum += exp(static_cast<double>(scale * xr[j * inner]) - m);
    for (int64_t j = 0; j < n; ++j)
      yr[j * inner] =
          j < limit ? static_cast<float>(exp(static_cast<double>(scale * xr[j * inner]) - m) / sum)
                    : 0.0f;
  }
}

template <typename Out>
__global__ void softmax_grad_kernel(const float* y, const float* dy, Out* dx, int64_t outer,
                                    int64_t n, int64_t inner, float scale) {
  TS_GRID_LOOP(r, outer * inner) {
    const int64_t at = (r / inner) * n * inner + r % inner;
    double dot = 0.0;
    for (int64_t j = 0; j < n; ++j)
      dot += static_cast<double>(y[at + j * inner]) * dy[at + j * inner];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t e = at + j * inner;
      store_result(dx + e, static_cast<float>(scale * y[e] * (dy[e] - dot)));
    }
  }
}

struct RowStats {
  double mean, rstd;
};
__device__ RowStats row_stats(const float* x, int64_t cols, float eps) {
  double sum = 0.0;
  for (int64_t c = 0; c < cols; ++c) sum += x[c];
  const double mean = sum / cols;
  double sq = 0.0;
  for (int64_t c = 0; c < cols; ++c) sq += (x[c] - mean) * (x[c] - mean);
  return {mean, 1.0 / sqrt(sq / cols + eps)};
}

template <typename Out>
__global__ void layernorm_kernel(const float* x, const float* gamma, const float* beta, Out* y,
                                 int64_t rows, int64_t cols, float eps) {
  TS_GRID_LOOP(r, rows) {
    const float* xr = x + r * cols;
    const RowStats s = row_stats(xr, cols, eps);
    for (int64_t c = 0; c < cols; ++c)
      store_result(y + r * cols + c,
                   static_cast<float>((xr[c] - s.mean) * s.rstd * gamma[c] + beta[c]));
  }
}

__global__ void layernorm_grad_input_kernel(const float* x, const float* gamma, const float* dy,
                                            float* dx, int64_t rows, int64_t cols, float eps) {
  TS_GRID_LOOP(r, rows) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const RowStats s = row_stats(xr, cols, eps);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * gamma[c];
      sum_g += g;
      sum_gx += g * (xr[c] - s.mean) * s.rstd;
    }
    for (int64_t c = 0; c < cols; ++c) {
      const double g = static_cast<double>(dyr[c]) * gamma[c];
      const double xhat = (xr[c] - s.mean) * s.rstd;
      dx[r * cols + c] = static_cast<float>(s.rstd * (g - sum_g / cols - xhat * sum_gx / cols));
    }
  }
}

__global__ void row_stats_kernel(const float* x, RowStats* stats, int64_t rows, int64_t cols,
                                 float eps) {
  TS_GRID_LOOP(r, rows) stats[r] = row_stats(x + r * cols, cols, eps);
}

// One thread per column, rows in order.
__global__ void layernorm_grad_params_kernel(const float* x, const float* dy, const RowStats* stats,
                                             float* dgamma, float* dbeta, int64_t rows,
                                             int64_t cols) {
  TS_GRID_LOOP(c, cols) {
    double g = 0.0, b = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const double d = dy[r * cols + c];
      g += d * (x[r * cols + c] - stats[r].mean) * stats[r].rstd;
      b += d;
    }
    dgamma[c] = static_cast<float>(g);
    dbeta[c] = static_cast<float>(b);
  }
}

// An id outside the table (checked on the host where data enters, so not
// expected here) gives NaN rather than a read outside the table.
__global__ void embedding_kernel(const float* table, const int32_t* ids, float* out, int64_t n,
                                 int64_t vocab, int64_t dim) {
  TS_GRID_LOOP(e, n * dim) {
    const int64_t id = ids[e / dim];
    out[e] = id >= 0 && id < vocab ? table[id * dim + e % dim] : __int_as_float(0x7fc00000);
  }
}

// One block per table row; its threads over the row's elements, each
// adding the ids' rows in id order (the CPU's order: f32, i ascending).
__global__ void embedding_grad_kernel(const int32_t* ids, const float* dout, float* dtable,
                                      int64_t n, int64_t vocab, int64_t dim) {
  for (int64_t v = blockIdx.x; v < vocab; v += gridDim.x)
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float acc = 0.0f;
      for (int64_t i = 0; i < n; ++i)
        if (ids[i] == v) acc = __fadd_rn(acc, dout[i * dim + d]);
      dtable[v * dim + d] = acc;
    }
}

__device__ void row_max_sum(const float* xr, int64_t vocab, double& m, double& s) {
  m = xr[0];
  for (int64_t v = 1; v < vocab; ++v) m = fmax(m, static_cast<double>(xr[v]));
  s = 0.0;
  for (int64_t v = 0; v < vocab; ++v) s += exp(xr[v] - m);
}

__global__ void cross_entropy_rows_kernel(const float* logits, const int32_t* labels,
                                          double* row_loss, int64_t rows, int64_t vocab) {
  TS_GRID_LOOP(r, rows) {
    const float* xr = logits + r * vocab;
    double m, s;
    row_max_sum(xr, vocab, m, s);
    const int32_t label = labels[r];  // outside the classes: NaN, as the embedding
    row_loss[r] = label >= 0 && label < vocab ? log(s) + m - xr[label] : nan("");
  }
}

// The mean, rows in order (one thread).
__global__ void mean_of_rows_kernel(const double* row_loss, int64_t rows, float* loss) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) total += row_loss[r];
  *loss = static_cast<float>(total / static_cast<double>(rows));
}

__global__ void cross_entropy_grad_kernel(const float* logits, const int32_t* labels,
                                          const float* dloss, float* dlogits, int64_t rows,
                                          int64_t vocab) {
  TS_GRID_LOOP(r, rows) {
    const float* xr = logits + r * vocab;
    double m, s;
    row_max_sum(xr, vocab, m, s);
    const float g = labels[r] >= 0 && labels[r] < vocab ? *dloss : __int_as_float(0x7fc00000);
    for (int64_t v = 0; v < vocab; ++v) {
      const double p = exp(xr[v] - m) / s;
      const double onehot = v == labels[r] ? 1.0 : 0.0;
      dlogits[r * vocab + v] = static_cast<float>(g * (p - onehot) / rows);
    }
  }
}

__global__ void dropout_kernel(const float* x, float* y, DropoutArgs a, int64_t n) {
  const PhiloxKey key{a.k0, a.k1, a.salt};
  TS_GRID_LOOP(e, n) {
    int64_t rest = e, index = a.base;
    for (int d = a.rank - 1; d >= 0; --d) {
      index += (rest % a.sizes.v[d] + a.offsets.v[d]) * a.strides.v[d];
      rest /= a.sizes.v[d];
    }
    const bool keep = philox_uniform(key, static_cast<uint64_t>(index), a.lane) >= a.p;
    y[e] = keep ? __fmul_rn(x[e], a.keep_scale) : 0.0f;
  }
}

__global__ void round_to_bf16_kernel(const float* src, uint16_t* dst, int64_t n) {
  TS_GRID_LOOP(i, n) dst[i] = f32_to_bf16_bits(src[i]);
}

__global__ void accumulate_kernel(float* dst, const float* src, int64_t n) {
  TS_GRID_LOOP(i, n) dst[i] = __fadd_rn(dst[i], src[i]);
}

// Block c sums chunk c: thread t its elements t, t + kThreads, ... in
// double, then a fixed shared-memory tree.
__global__ void sum_of_squares_chunks_kernel(const float* x, int64_t n, int64_t chunks,
                                             double* partials) {
  __shared__ double lanes[kThreads];
  const int64_t c = blockIdx.x;
  const int64_t begin = n / chunks * c + min(c, n % chunks);
  const int64_t end = n / chunks * (c + 1) + min(c + 1, n % chunks);
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) {
    const double d = x[i];
    acc += d * d;
  }
  lanes[threadIdx.x] = acc;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) lanes[threadIdx.x] += lanes[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[c] = lanes[0];
}

__global__ void sum_partials_kernel(const double* partials, int64_t chunks, double* result) {
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partials[c];
  *result = total;
}

// kernels::adamw_update's fast form; sqrt correctly rounded (the CPU's
// fast_sqrt is faithful: the two may differ in the last bit).
__global__ void adamw_kernel(float* param, const float* grad, float* m, float* v, int64_t n,
                             float step_size, float inv_sqrt_bc2, float decay, float beta1,
                             float beta2, float eps, float grad_scale) {
  const float one_m_b1 = 1.0f - beta1, one_m_b2 = 1.0f - beta2;
  TS_GRID_LOOP(i, n) {
    const float g = __fmul_rn(grad[i], grad_scale);
    const float mi = fmadd(beta1, m[i], __fmul_rn(one_m_b1, g));
    const float vi = fmadd(beta2, v[i], __fmul_rn(__fmul_rn(one_m_b2, g), g));
    m[i] = mi;
    v[i] = vi;
    const float denom = fmadd(__fsqrt_rn(vi), inv_sqrt_bc2, eps);
    param[i] = fmadd(param[i], decay, -__fdiv_rn(__fmul_rn(step_size, mi), denom));
  }
}

__global__ void sgd_kernel(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                           float grad_scale) {
  TS_GRID_LOOP(i, n) {
    const float g = fmadd(grad[i], grad_scale, __fmul_rn(weight_decay, param[i]));
    param[i] = fmadd(-lr, g, param[i]);
  }
}

}  // namespace

void softmax(const float* x, float* y, int64_t outer, int64_t n, int64_t inner, float scale,
             int64_t query_size, int64_t query_stride, cudaStream_t stream) {
  if (outer * n * inner == 0) return;
  launch("softmax", outer * inner, stream, softmax_kernel, x, y, outer, n, inner, scale, query_size,
         query_stride);
}

void softmax_grad(const float* y, const float* dy, void* dx, bool out_bf16, int64_t outer,
                  int64_t n, int64_t inner, float scale, cudaStream_t stream) {
  if (outer * n * inner == 0) return;
  if (out_bf16)
    launch("softmax_grad", outer * inner, stream, softmax_grad_kernel<uint16_t>, y, dy,
           static_cast<uint16_t*>(dx), outer, n, inner, scale);
  else
    launch("softmax_grad", outer * inner, stream, softmax_grad_kernel<float>, y, dy,
           static_cast<float*>(dx), outer, n, inner, scale);
}

void layernorm(const float* x, const float* gamma, const float* beta, void* y, bool out_bf16,
               int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  if (rows * cols == 0) return;
  if (out_bf16)
    launch("layernorm", rows, stream, layernorm_kernel<uint16_t>, x, gamma, beta,
           static_cast<uint16_t*>(y), rows, cols, eps);
  else
    launch("layernorm", rows, stream, layernorm_kernel<float>, x, gamma, beta,
           static_cast<float*>(y), rows, cols, eps);
}

void layernorm_grad_input(const float* x, const float* gamma, const float* dy, float* dx,
                          int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  if (rows * cols != 0)
    launch("layernorm_grad_input", rows, stream, layernorm_grad_input_kernel, x, gamma, dy, dx,
           rows, cols, eps);
}

size_t layernorm_grad_params_scratch(int64_t rows) { return rows * sizeof(RowStats); }

void layernorm_grad_params(const float* x, const float* dy, float* dgamma, float* dbeta,
                           void* stats, int64_t rows, int64_t cols, float eps,
                           cudaStream_t stream) {
  if (cols == 0) return;
  RowStats* s = static_cast<RowStats*>(stats);
  if (rows > 0)
    launch("layernorm_grad_params (row stats)", rows, stream, row_stats_kernel, x, s, rows, cols,
           eps);
  launch("layernorm_grad_params", cols, stream, layernorm_grad_params_kernel, x, dy, s, dgamma,
         dbeta, rows, cols);
}

void embedding(const float* table, const int32_t* ids, float* out, int64_t n, int64_t vocab,
               int64_t dim, cudaStream_t stream) {
  if (n * dim != 0)
    launch("embedding", n * dim, stream, embedding_kernel, table, ids, out, n, vocab, dim);
}

void embedding_grad(const int32_t* ids, const float* dout, float* dtable, int64_t n, int64_t vocab,
                    int64_t dim, cudaStream_t stream) {
  if (vocab * dim == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(vocab, 65535));
  embedding_grad_kernel<<<blocks, kThreads, 0, stream>>>(ids, dout, dtable, n, vocab, dim);
  check_launch("embedding_grad");
}

void cross_entropy(const float* logits, const int32_t* labels, float* loss, double* row_loss,
                   int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows > 0)
    launch("cross_entropy (rows)", rows, stream, cross_entropy_rows_kernel, logits, labels,
           row_loss, rows, vocab);
  mean_of_rows_kernel<<<1, 1, 0, stream>>>(row_loss, rows, loss);
  check_launch("cross_entropy (mean)");
}

void cross_entropy_grad(const float* logits, const int32_t* labels, const float* dloss,
                        float* dlogits, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows * vocab != 0)
    launch("cross_entropy_grad", rows, stream, cross_entropy_grad_kernel, logits, labels, dloss,
           dlogits, rows, vocab);
}

void dropout(const float* x, float* y, const DropoutArgs& args, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < args.rank; ++d) n *= args.sizes.v[d];
  if (n != 0) launch("dropout", n, stream, dropout_kernel, x, y, args, n);
}

void round_to_bf16(const float* src, uint16_t* dst, int64_t n, cudaStream_t stream) {
  if (n != 0) launch("round_to_bf16", n, stream, round_to_bf16_kernel, src, dst, n);
}

void accumulate(float* dst, const float* src, int64_t n, cudaStream_t stream) {
  if (n != 0) launch("accumulate", n, stream, accumulate_kernel, dst, src, n);
}

void sum_of_squares(const float* x, int64_t n, double* partials, double* result,
                    cudaStream_t stream) {
  constexpr int64_t kGrain = int64_t{1} << 15, kMaxChunks = 64;  // kernels/partition.h
  const int64_t chunks = std::clamp<int64_t>((n + kGrain - 1) / kGrain, 1, kMaxChunks);
  sum_of_squares_chunks_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(x, n, chunks,
                                                                                       partials);
  check_launch("sum_of_squares (chunks)");
  sum_partials_kernel<<<1, 1, 0, stream>>>(partials, chunks, result);
  check_launch("sum_of_squares (total)");
}

void adamw_update(float* param, const float* grad, float* m, float* v, int64_t n, float step_size,
                  float inv_sqrt_bc2, float decay, float beta1, float beta2, float eps,
                  float grad_scale, cudaStream_t stream) {
  if (n != 0)
    launch("adamw_update", n, stream, adamw_kernel, param, grad, m, v, n, step_size, inv_sqrt_bc2,
           decay, beta1, beta2, eps, grad_scale);
}

void sgd_update(float* param, const float* grad, int64_t n, float lr, float weight_decay,
                float grad_scale, cudaStream_t stream) {
  if (n != 0)
    launch("sgd_update", n, stream, sgd_kernel, param, grad, n, lr, weight_decay, grad_scale);
}

}  // namespace tessel::cuda
