// cuBLASLt einsums (cuda_einsum.h). Compiled only: not run on a GPU yet.
#include "tessel/backend/cuda/cuda_einsum.h"

#include <algorithm>
#include <cstdint>

#include "tessel/backend/cuda/cuda_check.h"
#include "tessel/backend/cuda/cuda_kernels.h"
#include "tessel/base/error.h"

namespace tessel::cuda {
namespace {

// Key fields (Gemm::Key).
enum : int { kTa, kTb, kM, kN, kK, kLda, kLdb, kLdc, kBatch, kSa, kSb, kSc, kAlA, kAlB, kAlC };

// The largest power of two up to 256 dividing the byte address (and stride).
int64_t alignment(const void* p, int64_t stride_elems) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(p) |
                        static_cast<uint64_t>(stride_elems) * sizeof(float) | uint64_t{256};
  return static_cast<int64_t>(bits & (~bits + 1));
}

// The common stride of `offsets` (offsets[i] == offsets[0] + i * stride), or -1.
int64_t uniform_stride(const std::vector<int64_t>& offsets) {
  if (offsets.size() < 2) return 0;
  const int64_t stride = offsets[1] - offsets[0];
  for (size_t i = 2; i < offsets.size(); ++i)
    if (offsets[i] - offsets[i - 1] != stride) return -1;
  return stride < 0 ? -1 : stride;
}

// A leading dimension cuBLASLt accepts: one column's is never used.
int64_t fixed_ld(int64_t rows, int64_t cols, int64_t ld) {
  if (cols <= 1) ld = std::max(ld, rows);
  return std::max<int64_t>(ld, 1);
}

// A column-major layout (rows x cols), batched when batch > 1.
cublasLtMatrixLayout_t layout(int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  TS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, static_cast<uint64_t>(rows),
                                             static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    TS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                     sizeof(count)));
    TS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &stride, sizeof(stride)));
  }
  return l;
}

}  // namespace

// Row-major C (m x n) = op(A) op(B) is column-major C^T (n x m) = op(B)^T
// op(A)^T: row-major B (k x n, or n x k transposed) read column-major is
// already B^T (n x k), so cuBLASLt's A is our B with our B's transpose flag,
// and likewise its B is our A.
LtShape lt_shape(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                 int64_t ldc, int64_t align_a, int64_t align_b, int64_t align_c) {
  LtShape s;
  s.align_a = align_b;
  s.align_b = align_a;
  s.align_c = align_c;
  s.trans_a = tb;
  s.a_rows = tb ? k : n;
  s.a_cols = tb ? n : k;
  s.lda = fixed_ld(s.a_rows, s.a_cols, ldb);
  s.trans_b = ta;
  s.b_rows = ta ? m : k;
  s.b_cols = ta ? k : m;
  s.ldb = fixed_ld(s.b_rows, s.b_cols, lda);
  s.c_rows = n;
  s.c_cols = m;
  s.ldc = fixed_ld(n, m, ldc);
  return s;
}

GemmCall einsum_gemm(const kernels::EinsumPlan& p, const float* a, const float* b, float* c) {
  if (!p.swap)
    return GemmCall{p.a.transposed,
                    p.b.transposed,
                    p.m,
                    p.n,
                    p.k,
                    p.a.ld,
                    p.b.ld,
                    p.c.ld,
                    a,
                    b,
                    c,
                    &p.a.batch_offsets,
                    &p.b.batch_offsets,
                    &p.c.batch_offsets};
  return GemmCall{!p.b.transposed,
                  !p.a.transposed,
                  p.n,
                  p.m,
                  p.k,
                  p.b.ld,
                  p.a.ld,
                  p.c.ld,
                  b,
                  a,
                  c,
                  &p.b.batch_offsets,
                  &p.a.batch_offsets,
                  &p.c.batch_offsets};
}

Gemm::Gemm(void* workspace, size_t workspace_bytes)
    : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  TS_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
  if (handle_) cublasLtDestroy(handle_);
}

const cublasLtMatmulAlgo_t& Gemm::algo(const Key& key, const LtShape& shape,
                                       cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                       cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc) {
  if (auto it = algos_.find(key); it != algos_.end()) return it->second;
  cublasLtMatmulPreference_t pref = nullptr;
  TS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = workspace_bytes_;
  TS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t al[3] = {static_cast<uint32_t>(shape.align_a),
                          static_cast<uint32_t>(shape.align_b),
                          static_cast<uint32_t>(shape.align_c)};
  TS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof(uint32_t)));
  TS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof(uint32_t)));
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    TS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &al[2], sizeof(uint32_t)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, desc, la, lb, lc, lc, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  TS_CUBLAS_CHECK(st);
  if (found == 0)
    TS_THROW("device cuda: cuBLASLt has no algorithm for a ", key[kM], " x ", key[kN], " x ",
             key[kK], " matmul (batch ", key[kBatch], ")");
  return algos_.emplace(key, result.algo).first->second;
}

// Row-major C (m x n) = op(A) op(B) as column-major C^T = op(B)^T op(A)^T:
// cuBLASLt's A is our B (n x k), its B our A (k x m), its C ours (n x m).
void Gemm::matmul(const Key& key, const float* a, const float* b, float* c, cudaStream_t stream) {
  const bool ta = key[kTa], tb = key[kTb];
  const int64_t m = key[kM], n = key[kN], k = key[kK], batch = key[kBatch];
  cublasLtMatmulDesc_t desc = nullptr;
  TS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const LtShape ls =
      lt_shape(ta, tb, m, n, k, key[kLda], key[kLdb], key[kLdc], key[kAlA], key[kAlB], key[kAlC]);
  const cublasOperation_t op_a = ls.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = ls.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  TS_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  TS_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  cublasLtMatrixLayout_t la = layout(ls.a_rows, ls.a_cols, ls.lda, batch, key[kSb]);
  cublasLtMatrixLayout_t lb = layout(ls.b_rows, ls.b_cols, ls.ldb, batch, key[kSa]);
  cublasLtMatrixLayout_t lc = layout(ls.c_rows, ls.c_cols, ls.ldc, batch, key[kSc]);
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  try {
    const cublasLtMatmulAlgo_t& chosen = algo(key, ls, desc, la, lb, lc);
    st = cublasLtMatmul(handle_, desc, &one, b, la, a, lb, &zero, c, lc, c, lc, &chosen, workspace_,
                        workspace_bytes_, stream);
  } catch (...) {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    throw;
  }
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  TS_CUBLAS_CHECK(st);
}

void Gemm::gemm(const GemmCall& g, cudaStream_t stream) {
  const int64_t batch = static_cast<int64_t>(g.a_offsets->size());
  if (batch == 0 || g.m == 0 || g.n == 0 || g.k == 0) return;
  const int64_t sa = uniform_stride(*g.a_offsets), sb = uniform_stride(*g.b_offsets),
                sc = uniform_stride(*g.c_offsets);
  const bool strided = batch == 1 || (sa >= 0 && sb >= 0 && sc >= 0);
  const int64_t calls = strided ? 1 : batch;
  for (int64_t i = 0; i < calls; ++i) {
    const float* a = g.a + (*g.a_offsets)[i];
    const float* b = g.b + (*g.b_offsets)[i];
    float* c = g.c + (*g.c_offsets)[i];
    const int64_t nb = strided ? batch : 1;
    const int64_t xa = nb > 1 ? sa : 0, xb = nb > 1 ? sb : 0, xc = nb > 1 ? sc : 0;
    const Key key{g.ta,
                  g.tb,
                  g.m,
                  g.n,
                  g.k,
                  g.lda,
                  g.ldb,
                  g.ldc,
                  nb,
                  xa,
                  xb,
                  xc,
                  alignment(a, xa),
                  alignment(b, xb),
                  alignment(c, xc),
                  0};
    matmul(key, a, b, c, stream);
  }
}

void Gemm::einsum(const kernels::EinsumPlan& p, const float* a, const float* b, float* out,
                  float* scratch, cudaStream_t stream) {
  // Permuted operands are gathered into dense canonical order in scratch
  // (a at 0, b after a's share, c after both); restrided ones read in place.
  auto stage = [&](const kernels::GemmOperand& op, const float* x, float* dense) {
    Dims strides, sizes;
    const int rank = static_cast<int>(op.canon_sizes.size());
    TS_CHECK(rank <= kMaxRank, "einsum: rank ", rank, " exceeds ", kMaxRank);
    for (int d = 0; d < rank; ++d) {
      strides.v[d] = op.canon_strides[d];
      sizes.v[d] = op.canon_sizes[d];
    }
    expand(x, strides, dense, sizes, rank, stream);
  };
  float* a_dense = scratch;
  float* b_dense = scratch + p.scratch_a;
  float* c_dense = scratch + p.scratch_a + p.scratch_b;
  const float* a_use = p.a.permute ? (stage(p.a, a, a_dense), a_dense) : a;
  const float* b_use = p.b.permute ? (stage(p.b, b, b_dense), b_dense) : b;
  float* c_use = p.c.permute ? c_dense : out;
  if (p.k == 0 || p.m == 0 || p.n == 0) return;  // as the CPU kernel
  gemm(einsum_gemm(p, a_use, b_use, c_use), stream);
  if (p.c.permute) {
    Dims strides, sizes;
    const int rank = static_cast<int>(p.c.canon_sizes.size());
    TS_CHECK(rank <= kMaxRank, "einsum: rank ", rank, " exceeds ", kMaxRank);
    for (int d = 0; d < rank; ++d) {
      strides.v[d] = p.c.canon_strides[d];
      sizes.v[d] = p.c.canon_sizes[d];
    }
    scatter(c_dense, out, strides, sizes, rank, stream);
  }
}

}  // namespace tessel::cuda
