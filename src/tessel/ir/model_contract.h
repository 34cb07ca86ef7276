// The contract between a model and the passes, layouts and pipelines that
// work on it without knowing it: the names a model must use for the library
// to find its batch, its attention, its blocks, and the names the library
// reserves for itself.
//
// A model (models/, or one registered with register_model) that follows it
// gets, for free:
//   - data parallelism and ZeRO: its inputs lead with the `batch` dim, which
//     the default layout splits over the `data` mesh axis, and micro-batches
//     are consecutive row blocks of it;
//   - selective recomputation: attention's quadratic values are the ones
//     with both the query dim `seq` and the key dim `kseq`;
//   - block recomputation and pipeline stages: every node of the N-th
//     repeated block is labelled "blockN.<...>" (a GraphBuilder scope named
//     block_scope(N)); block_of_label (passes/block_label.h) reads N back;
//   - pipelines: the `pipe` mesh axis numbers pipeline ranks and is never a
//     layout target; values a stage graph adds are named "pipe.<...>"
//     ("pipe.act.<id>", "pipe.grad.<id>"), so a model must not use that prefix.
// Nothing else about a model's dims or labels is interpreted. A model's
// builder returns its TaskGraph.
#pragma once

#include <optional>
#include <string>

#include "tessel/ir/graph.h"

namespace tessel {

struct TaskGraph {
  ValueId loss;                   // scalar mean cross-entropy
  std::optional<ValueId> logits;  // none when the model has none
};

inline const std::string kBatchDim = "batch";  // rows of the batch; inputs lead with it
inline const std::string kSeqDim = "seq";      // query positions
inline const std::string kKeySeqDim = "kseq";  // key positions (attention's second seq dim)
inline const std::string kBlockPrefix = "block";
inline const std::string kPipeAxis = "pipe";
inline const std::string kPipeValuePrefix = "pipe.";
inline const std::string kPipeActivationPrefix = "pipe.act.";
inline const std::string kPipeGradientPrefix = "pipe.grad.";

// The scope name of the N-th repeated block: "blockN".
inline std::string block_scope(int n) { return kBlockPrefix + std::to_string(n); }

}  // namespace tessel
