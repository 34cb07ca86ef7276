// The CUDA einsum's host side, checked without a GPU: for every einsum of
// every op harness graph (forward and gradient einsums), the GEMM that
// cuda::Gemm would hand cuBLASLt (einsum_gemm, then lt_shape's column-major
// shapes, transposes and leading dimensions, per batch offset) is carried
// out here by a plain column-major matmul loop, with the plan's permuted
// operands staged and its permuted output scattered as the CUDA kernels
// would, and compared with kernels::einsum_ref. What this cannot check is
// cuBLASLt itself (its layouts' attributes, algorithms, alignment): the GPU
// harness (cuda_op_harness_test.cc) does.
#include <gtest/gtest.h>

#include <cmath>

#include "common/op_cases.h"
#include "tessel/backend/cuda/cuda_einsum.h"
#include "tessel/kernels/einsum.h"
#include "tessel/kernels/elementwise.h"

namespace tessel {
namespace {

// Stored column-major element (row, col) of a matrix with leading dimension ld.
float at(const float* x, int64_t ld, int64_t row, int64_t col) { return x[col * ld + row]; }

// D = op(A) op(B) as cuBLASLt computes it, for one batch index.
void lt_matmul(const cuda::LtShape& s, int64_t k, const float* a, const float* b, float* c) {
  for (int64_t col = 0; col < s.c_cols; ++col)
    for (int64_t row = 0; row < s.c_rows; ++row) {
      double acc = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const float x = s.trans_a ? at(a, s.lda, p, row) : at(a, s.lda, row, p);
        const float y = s.trans_b ? at(b, s.ldb, col, p) : at(b, s.ldb, p, col);
        acc += static_cast<double>(x) * y;
      }
      c[col * s.ldc + row] = static_cast<float>(acc);
    }
}

// The canonical-order copy the CUDA expand kernel makes of a permuted operand.
std::vector<float> staged(const kernels::GemmOperand& op, const std::vector<float>& x) {
  int64_t n = 1;
  for (int64_t s : op.canon_sizes) n *= s;
  std::vector<float> dense(n);
  kernels::expand(x.data(), op.canon_strides.data(), dense.data(), op.canon_sizes.data(),
                  static_cast<int>(op.canon_sizes.size()));
  return dense;
}

// out = einsum(a, b) the way cuda::Gemm::einsum runs it, on the host.
std::vector<float> einsum_as_cuda_runs_it(const Shape& sa, const std::vector<float>& a,
                                          const Shape& sb, const std::vector<float>& b,
                                          const Shape& so) {
  const kernels::EinsumPlan p = kernels::plan_einsum(sa, sb, so);
  std::vector<float> out(so.numel(), 0.0f);
  const std::vector<float> a_dense = p.a.permute ? staged(p.a, a) : a;
  const std::vector<float> b_dense = p.b.permute ? staged(p.b, b) : b;
  std::vector<float> c_dense(p.c.permute ? p.batch * p.m * p.n : 0);
  float* c = p.c.permute ? c_dense.data() : out.data();
  const cuda::GemmCall g = cuda::einsum_gemm(p, a_dense.data(), b_dense.data(), c);
  if (p.m == 0 || p.n == 0 || p.k == 0) return out;
  const cuda::LtShape s = cuda::lt_shape(g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc);
  // cuBLASLt's requirements on a layout: ld >= rows.
  EXPECT_GE(s.lda, s.a_rows);
  EXPECT_GE(s.ldb, s.b_rows);
  EXPECT_GE(s.ldc, s.c_rows);
  for (size_t i = 0; i < g.a_offsets->size(); ++i)
    lt_matmul(s, g.k, g.b + (*g.b_offsets)[i], g.a + (*g.a_offsets)[i], g.c + (*g.c_offsets)[i]);
  if (p.c.permute) {  // the CUDA scatter kernel: dense[e] to out at the canonical strides
    const int rank = static_cast<int>(p.c.canon_sizes.size());
    for (int64_t e = 0; e < static_cast<int64_t>(c_dense.size()); ++e) {
      int64_t rest = e, off = 0;
      for (int d = rank - 1; d >= 0; --d) {
        off += (rest % p.c.canon_sizes[d]) * p.c.canon_strides[d];
        rest /= p.c.canon_sizes[d];
      }
      out[off] = c_dense[e];
    }
  }
  return out;
}

TEST(CudaEinsumMapping, ColumnMajorCallsComputeEveryHarnessEinsum) {
  int einsums = 0;
  for (const OpCase& c : op_cases()) {
    const Harness h = make_harness(c);
    for (const Node& node : h.graph.nodes()) {
      if (node.kind != OpKind::kEinsum) continue;
      ++einsums;
      const Shape& sa = h.graph.node(node.inputs[0]).shape;
      const Shape& sb = h.graph.node(node.inputs[1]).shape;
      std::vector<float> a(sa.numel()), b(sb.numel()), want(node.shape.numel());
      for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(1.3 * i + 0.2);
      for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.7 * i + 0.5);
      kernels::einsum_ref(sa, a.data(), sb, b.data(), node.shape, want.data());
      const std::vector<float> got = einsum_as_cuda_runs_it(sa, a, sb, b, node.shape);
      for (size_t e = 0; e < want.size(); ++e)
        ASSERT_NEAR(got[e], want[e], 1e-5 * (1 + std::abs(want[e])))
            << c.name << ": einsum '" << node.name << "' " << sa << " x " << sb << " -> "
            << node.shape << ", element " << e;
    }
  }
  EXPECT_GE(einsums, 10);
}

// cuBLASLt's A is our B: the algorithm is told each of its operands' own
// alignment (a mix-up lets it pick a kernel the pointer cannot take).
TEST(CudaEinsumMapping, EachLtOperandCarriesItsOwnAlignment) {
  const cuda::LtShape s = cuda::lt_shape(false, false, 8, 16, 4, 4, 16, 16, 256, 4, 16);
  EXPECT_EQ(s.align_a, 4) << "cuBLASLt's A is our B";
  EXPECT_EQ(s.align_b, 256) << "cuBLASLt's B is our A";
  EXPECT_EQ(s.align_c, 16);
}

}  // namespace
}  // namespace tessel
