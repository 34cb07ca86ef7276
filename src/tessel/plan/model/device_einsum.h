// What an einsum costs on a device that is not this CPU, beyond its GEMM.
//
// A device GEMM library's batched GEMM (cuBLAS-style: strided batched, or
// batched with a pointer per matrix when the batch dims are not one evenly
// strided index) takes each matrix as [rows][cols] with one stride per
// index, and needs its rows or its columns contiguous (a leading
// dimension). So an einsum's operand a (batch.., m, k), b (batch.., k, n) or
// result (batch.., m, n) is read or written in place when its row group and
// its column group each merge into one evenly strided index (size-1 dims
// never break a run) and one of the two has stride 1, wherever its batch
// dims lie; otherwise it is permuted into a dense copy first (the result:
// computed dense, then permuted into place), one read and one write of its
// bytes.
// The groups are einsum_groups() of kernels/einsum.h. A pure function of the
// shapes and the precision: the same whatever CPU the planner runs on (the
// kernels this build compiled are not consulted). Operands are bf16 (2
// bytes) in a bf16 plan, f32 otherwise; the result is f32 (f32
// accumulation).
#pragma once

#include "tessel/base/shape.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

// Bytes the copies read and write in all (0 when every operand is in place).
double device_einsum_copy_bytes(const Shape& a, const Shape& b, const Shape& out, Precision p);

}  // namespace tessel::plan
