// The op vocabulary of the graph IR: kinds and their attributes.
//
// Every node of a Graph is one of these kinds; its shape rule lives in the op
// table (op_table.h), its gradient rule in the VJP table (autodiff/), its
// kernel in the runtime's dispatch. Attributes are one plain struct shared by
// all ops; each op reads only the fields its entry in the op table documents.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/base/shape.h"

namespace tessel {

enum class OpKind {
  // Leaves.
  kInput,  // data fed each step (tokens, labels, images)
  kParam,  // a trainable parameter, stored outside the activation arena
  kFill,   // constant: every element = attrs.scalar; shape = attrs.shape
  // Linear algebra.
  kEinsum,  // (a, b) -> attrs.dims order; dims in a and b but not out are contracted
  // Elementwise, broadcasting by dim name.
  kAdd,
  kSub,
  kMul,
  kDiv,
  kScale,  // x * attrs.scalar
  kGelu,   // tanh form
  kRelu,
  kExp,
  kLog,
  kTanh,
  kBiasGelu,  // gelu(x + bias), bias's dims a suffix of x's
  kDropout,   // attrs.scalar = p, attrs.key = stream name, attrs.seed, attrs.dim = row dim
  // Reductions and broadcasts over named dims.
  kReduceSum,   // over attrs.dims
  kReduceMean,  // over attrs.dims
  kReduceMax,   // over attrs.dims
  kExpand,      // broadcast to attrs.shape (x's dims a subset)
  // Normalisation and losses.
  kSoftmax,    // over attrs.dim, times attrs.scalar; causal if attrs.dim2 names the query dim
  kLayerNorm,  // (x, gamma, beta) over attrs.dim (last), eps = attrs.scalar
  kEmbedding,  // (table(vocab, ...), ids i32) -> ids dims + table's other dims; vocab = attrs.dim
  kCrossEntropy,  // (logits(..., vocab), labels i32) -> mean loss, a scalar; vocab = attrs.dim
  // Views: no data movement, the output aliases the input's storage.
  kSplitDim,   // attrs.dim -> attrs.shape's dims, in place
  kMergeDims,  // adjacent attrs.dims -> one dim named attrs.dim2
  kRename,     // attrs.dim -> attrs.dim2
  // Tuples (ir/tuple.h) and the ops that make them.
  kTupleGet,       // view of element attrs.offset of a tuple
  kAttention,      // (q, k, v) -> (out, lse): fused softmax(scale q.k) v; attrs in ir/attrs.h
  kAttentionGrad,  // (q, k, v, lse, dout, out) -> (dq, dk, dv), attrs as the forward
  // (h, w, labels i32) -> (loss, lse): the mean cross-entropy of the logits
  // h . w over attrs.dim (vocab) contracting attrs.dim2 (embed, h's last),
  // never stored; w is (vocab, embed) or (embed, vocab); lse: h's rows
  kLinearCrossEntropy,
  kLinearCrossEntropyGrad,  // (h, w, labels, lse, dloss) -> (dh, dw), attrs as the forward
  // Gradient ops, produced by autodiff.
  kGeluGrad,            // (x, dy)
  kReluGrad,            // (x, dy)
  kTanhGrad,            // (y, dy)
  kBiasGeluGrad,        // (x, bias, dy) -> d(pre-activation)
  kReduceMaxGrad,       // (x, y, dy)
  kSoftmaxGrad,         // (y, dy), attrs as the forward softmax
  kLayerNormGradInput,  // (x, gamma, dy)
  kLayerNormGradGamma,  // (x, dy) -> shape of gamma
  kEmbeddingGrad,       // (ids, dy) -> table shape (attrs.shape)
  kCrossEntropyGrad,    // (logits, labels, dloss)
  // The Llama family's ops, with their gradient ops.
  kSilu,         // x * sigmoid(x)
  kSigmoid,      // 1 / (1 + exp(-x))
  kSqrt,         // sqrt(x)
  kRsqrt,        // 1 / sqrt(x)
  kRmsNorm,      // (x, gamma) over attrs.dim (last), eps = attrs.scalar
  kRotary,       // rotary positions: pairs of attrs.dim (last) turned by position along attrs.dim2
  kSiluGrad,     // (x, dy)
  kSigmoidGrad,  // (y, dy)
  kRmsNormGradInput,  // (x, gamma, dy)
  kRmsNormGradGamma,  // (x, dy) -> shape of gamma
  kRotaryGrad,        // (dy): the inverse rotation, attrs as the forward
  // Collectives and local reshards, inserted by the sharding lowering on a
  // rank's local graph. attrs.axis names the mesh axis, attrs.count its size.
  kShardSlice,      // B -> S(attrs.dim): keep slice attrs.offset of count (local)
  kAllGather,       // S(attrs.dim) -> B
  kReduceScatter,   // P(sum) -> S(attrs.dim)
  kAllReduce,       // P -> B; attrs.key "sum" or "max"
  kAllToAll,        // S(attrs.dim) -> S(attrs.dim2)
  kZeroUnlessRoot,  // B -> P(sum): the value on coordinate 0 (attrs.offset == 0), zeros elsewhere
  kCount,
};

const char* op_name(OpKind kind);

// Whether a per-kind table (entries with a `kind`) lists every OpKind in enum
// order, entry i for kind i: the tables' static_assert.
template <typename Table>
constexpr bool lists_every_kind_in_order(const Table& table) {
  for (size_t i = 0; i < table.size(); ++i)
    if (static_cast<size_t>(table[i].kind) != i) return false;
  return table.size() == static_cast<size_t>(OpKind::kCount);
}

// Nodes that exist only on a rank's local graph (the boxing's collectives and
// local reshards), and of those the ones that talk to other ranks.
inline bool is_local_graph_op(OpKind kind) {
  return kind >= OpKind::kShardSlice && kind < OpKind::kCount;
}
inline bool communicates(OpKind kind) {
  return kind == OpKind::kAllGather || kind == OpKind::kReduceScatter ||
         kind == OpKind::kAllReduce || kind == OpKind::kAllToAll;
}

struct Attrs {
  std::vector<std::string> dims;  // einsum output order; reduce dims; merge dims
  std::string dim;       // softmax / layernorm / vocab / split / rename-from / dropout row dim
  std::string dim2;      // causal query dim; merged or renamed-to name
  Shape shape;           // fill / expand target; split parts; embedding-grad table
  float scalar = 0.0f;   // scale factor; eps; dropout p; fill value
  float scalar2 = 0.0f;  // attention: dropout p on the probabilities
  std::string key;       // dropout stream name (dropout, attention); all-reduce kind
  uint64_t seed = 0;     // dropout seed (dropout, attention)
  // Set on a rank's local graph by the sharding lowering.
  std::string axis;              // mesh axis of a collective; vocab axis of sharded cross-entropy
  int64_t count = 1;             // size of that axis
  int64_t offset = 0;            // coordinate on it; first vocab row of a vocab shard
  int64_t total = 0;             // cross-entropy: rows of the global batch (0: local = global)
  std::vector<int64_t> offsets;  // dropout, rotary, attention: this shard's offset along each dim
  bool overlap = false;          // all-reduce of a program output: may be bucketed and overlapped
};

}  // namespace tessel
