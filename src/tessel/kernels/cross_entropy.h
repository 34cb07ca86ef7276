// Softmax cross-entropy loss over (rows, vocab) logits with int32 class labels,
// and its backward.
//
// The loss is the mean over rows of -log softmax(logits)[label], computed
// stably as logsumexp(row) - logits[label]. Every label is checked against
// [0, vocab) before any work; a bad one throws tessel::Error naming the row,
// the label and the vocab size. The forward sums rows in fixed chunks with
// double accumulators, combined in chunk order: bitwise identical for any
// thread count.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// logits (rows, vocab), labels (rows) -> mean_rows(-log softmax(logits)[label])
float cross_entropy_forward(const float* logits, const int32_t* labels, int64_t rows,
                            int64_t vocab);
float cross_entropy_forward_ref(const float* logits, const int32_t* labels, int64_t rows,
                                int64_t vocab);

// logits (rows, vocab), labels (rows), dloss (scalar)
//   -> dlogits (rows, vocab) = dloss * (softmax(logits) - onehot(label)) / rows
void cross_entropy_backward(const float* logits, const int32_t* labels, float dloss, float* dlogits,
                            int64_t rows, int64_t vocab);
void cross_entropy_backward_ref(const float* logits, const int32_t* labels, float dloss,
                                float* dlogits, int64_t rows, int64_t vocab);

}  // namespace tessel::kernels
