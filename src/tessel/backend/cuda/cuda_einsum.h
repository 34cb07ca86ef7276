// Einsum on cuBLASLt: a kernels::EinsumPlan (the CPU's decomposition into
// batched row-major GEMMs, permuted operands staged in scratch) run as
// column-major cuBLASLt matmuls (C^T = B^T A^T), f32 in and out with
// CUBLAS_COMPUTE_32F (no TF32). The algorithm of each shape, leading
// dimensions, batch strides and pointer alignments is chosen once with
// cublasLtMatmulAlgoGetHeuristic and cached, so a shape's result repeats
// bitwise. The CPU's restride copies (a Zen 3 cache workaround) are not
// made: operands are read in place. Compiled only: not run on a GPU.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "tessel/kernels/einsum.h"

namespace tessel::cuda {

// One row-major GEMM, batched: C_i = op(A_i) op(B_i), operand i at
// pointer + offsets[i] (elements).
struct GemmCall {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  const float* a = nullptr;
  const float* b = nullptr;
  float* c = nullptr;
  const std::vector<int64_t>* a_offsets = nullptr;
  const std::vector<int64_t>* b_offsets = nullptr;
  const std::vector<int64_t>* c_offsets = nullptr;
};

// The GEMM an einsum plan runs on its operands as staged (a permuted
// operand dense in scratch, else in place): the plan's, or for a swapped
// plan C^T = B^T A^T.
GemmCall einsum_gemm(const kernels::EinsumPlan& plan, const float* a, const float* b, float* c);

// cuBLASLt's view of one row-major GEMM: column-major C^T = op(B)^T op(A)^T,
// so its A is our B and its B our A. Stored shapes (rows x cols, leading
// dimension >= rows where a matrix has one column), transposes, and the
// byte alignment each of its operands' pointers (and batch strides) has,
// which the algorithm's choice is told (its A's is our B's).
struct LtShape {
  bool trans_a = false, trans_b = false;
  int64_t a_rows = 0, a_cols = 0, lda = 0;
  int64_t b_rows = 0, b_cols = 0, ldb = 0;
  int64_t c_rows = 0, c_cols = 0, ldc = 0;
  int64_t align_a = 0, align_b = 0, align_c = 0;
};
// `align_*`: the byte alignment of our A, B and C (pointer and batch stride).
LtShape lt_shape(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int64_t lda, int64_t ldb,
                 int64_t ldc, int64_t align_a = 4, int64_t align_b = 4, int64_t align_c = 4);

class Gemm {
 public:
  // `workspace` (device, `workspace_bytes`) outlives this object.
  Gemm(void* workspace, size_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out = einsum(a, b) by `plan`; scratch holds plan.scratch_elements() floats.
  void einsum(const kernels::EinsumPlan& plan, const float* a, const float* b, float* out,
              float* scratch, cudaStream_t stream);

  void gemm(const GemmCall& call, cudaStream_t stream);

 private:
  using Key = std::array<int64_t, 16>;
  void matmul(const Key& key, const float* a, const float* b, float* c, cudaStream_t stream);
  const cublasLtMatmulAlgo_t& algo(const Key& key, const LtShape& shape, cublasLtMatmulDesc_t desc,
                                   cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                   cublasLtMatrixLayout_t lc);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_;
  size_t workspace_bytes_;
  std::map<Key, cublasLtMatmulAlgo_t> algos_;
};

}  // namespace tessel::cuda
