// Embedding lookup: rows of a (vocab, dim) table gathered by int32 ids, and the
// scatter-add backward.
//
// Every id is checked against [0, vocab) before anything is written; a bad one
// throws tessel::Error naming the position, the id and the vocab size. The
// backward gives each thread a disjoint range of table rows and adds positions
// in increasing order, so it never races and is bitwise identical for any
// thread count.
#pragma once

#include <cstdint>

namespace tessel::kernels {

// table (vocab, dim), ids (n) -> out (n, dim), out[i] = table[ids[i]]
void embedding_forward(const float* table, const int32_t* ids, float* out, int64_t n, int64_t vocab,
                       int64_t dim);
void embedding_forward_ref(const float* table, const int32_t* ids, float* out, int64_t n,
                           int64_t vocab, int64_t dim);

// ids (n), dout (n, dim) -> dtable (vocab, dim) = sum over i with ids[i] == v of dout[i].
// Overwrites dtable (rows no id hits are zero).
void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                        int64_t vocab, int64_t dim);
void embedding_backward_ref(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                            int64_t vocab, int64_t dim);

}  // namespace tessel::kernels
