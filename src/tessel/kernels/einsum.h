// Einsum over named dims, executed as (batched) GEMM through oneDNN.
//
// Dims of the two operands are classified by name: batch (in a, b and out),
// m (a and out), n (b and out), k (a and b, contracted). When each of m, n, k
// forms one stride-mergeable group in the operands that hold it and one of a
// matrix's groups is contiguous, the operands are used in place — strided
// leading dimensions and transposes cover attention's (batch, seq, heads,
// head) layouts without copies. Otherwise an operand is first copied into a
// canonical [batch.., m.., k..] / [batch.., k.., n..] order in scratch space
// whose size the plan states, so the memory plan can reserve it.
// Batched products run one sgemm per batch index, parallel over batches.
//
// One in-place case is copied all the same: an operand stored as k lines (the
// contracted dim strided, its free dim contiguous) whose leading dimension is
// a multiple of 512 floats (2 KiB), beside 64-383 rows or columns of the
// other operand. oneDNN's sgemm ran such products at half its rate on Zen 3
// (27 against 55 GFLOP/s for gpt-pipeline's 1024 x 256 x 4096 weight
// gradient): the lines' elements fall in the same few cache sets. The lines
// are copied into scratch with a padded leading dimension first
// (restride_ld), one read and one write of the operand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/base/shape.h"

namespace tessel::kernels {

// How one operand is read or the output written.
struct GemmOperand {
  bool permute = false;                // copy into canonical order first (scratch)
  std::vector<int64_t> canon_strides;  // strides of the original, in canonical dim order
  std::vector<int64_t> canon_sizes;    // sizes in canonical dim order
  bool transposed = false;             // stored as (cols, rows)
  int64_t ld = 1;                      // leading dimension as stored
  std::vector<int64_t> batch_offsets;  // element offset of each batch index
  // Nonzero: copy the operand's stored lines (k of them, each its free
  // dim's elements, `ld` apart) into dense scratch [batch, k, restride_ld]
  // first and read it from there.
  int64_t restride_ld = 0;
};

struct EinsumPlan {
  int64_t batch = 1, m = 1, n = 1, k = 1;
  bool swap = false;  // compute C^T = B^T A^T (output's m group is the contiguous one)
  GemmOperand a, b, c;
  int64_t scratch_a = 0, scratch_b = 0, scratch_c = 0;  // elements of scratch each needs

  int64_t scratch_elements() const { return scratch_a + scratch_b + scratch_c; }
};

// The dims of an einsum by role, each group in the output's (for k: a's) order.
struct EinsumGroups {
  std::vector<std::string> batch, m, n, k;
};
EinsumGroups einsum_groups(const Shape& a, const Shape& b, const Shape& out);

// The elements of `group` taken as one index of `s`.
int64_t group_size(const Shape& s, const std::vector<std::string>& group);
// The stride of `group` (its dims in this order) taken as one index of `s`,
// or -1 when its dims do not form one evenly strided run (size-1 dims never
// break a run); `unit` when every dim of the group has size 1.
int64_t group_stride(const Shape& s, const std::vector<std::string>& group, int64_t unit = 0);

// REQUIRES: shapes satisfy the einsum shape rule (op_table.h).
EinsumPlan plan_einsum(const Shape& a, const Shape& b, const Shape& out);

// out = einsum(a, b). `scratch` holds plan.scratch_elements() floats.
void einsum(const EinsumPlan& plan, const float* a, const float* b, float* out, float* scratch);

// Naive twin: loops over every output and contracted index, double accumulators.
void einsum_ref(const Shape& a_shape, const float* a, const Shape& b_shape, const float* b,
                const Shape& out_shape, float* out);

}  // namespace tessel::kernels
