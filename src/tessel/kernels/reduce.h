// Reductions (sum, mean, max) over any subset of the dims of a contiguous tensor,
// and the backward of max.
//
// x is contiguous row-major with sizes[0..rank); reduced[d] marks the dims
// reduced away. y is contiguous and holds the kept dims in their original order
// (a scalar when every dim is reduced). Results are bitwise identical for any
// thread count (see partition.h for how).
// Sum and mean accumulate in f32 (many independent lanes); max propagates NaN.
#pragma once

#include <cstdint>

namespace tessel::kernels {

enum class ReduceOp { kSum, kMean, kMax };

// x (sizes) -> y (sizes with the reduced dims removed). rank <= 16.
// Mean over zero elements is NaN; max over zero elements throws tessel::Error.
// Fast paths: reduced dims leading (e.g. bias gradient (batch, seq, embed) ->
// (embed)), reduced dims trailing (per-row reduce), reduced dims in the middle.
void reduce(ReduceOp op, const float* x, const int64_t* sizes, int rank, const bool* reduced,
            float* y);
void reduce_ref(ReduceOp op, const float* x, const int64_t* sizes, int rank, const bool* reduced,
                float* y);

// x (sizes), y = reduce(kMax, x), dy (shape of y) -> dx (sizes).
// Tie rule: the whole gradient dy goes to the first position attaining the max,
// "first" meaning lowest row-major index of x within the reduced set; every other
// position gets 0. If y is NaN it goes to the first NaN.
void reduce_max_backward(const float* x, const float* y, const float* dy, const int64_t* sizes,
                         int rank, const bool* reduced, float* dx);
void reduce_max_backward_ref(const float* x, const float* y, const float* dy, const int64_t* sizes,
                             int rank, const bool* reduced, float* dx);

}  // namespace tessel::kernels
