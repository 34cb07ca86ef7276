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
  kDropout,   // attrs.scalar = p, attrs.key = stream name, attrs.seed
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
  kCount,
};

const char* op_name(OpKind kind);

struct Attrs {
  std::vector<std::string> dims;  // einsum output order; reduce dims; merge dims
  std::string dim;                // softmax / layernorm / vocab / split / rename-from dim
  std::string dim2;               // causal query dim; merged or renamed-to name
  Shape shape;                    // fill / expand target; split parts; embedding-grad table
  float scalar = 0.0f;            // scale factor; eps; dropout p; fill value
  std::string key;                // dropout stream name
  uint64_t seed = 0;              // dropout seed
};

}  // namespace tessel
