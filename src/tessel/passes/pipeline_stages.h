// Pipeline partition: a model's forward graph cut into stages, and each
// stage's own graph with its forward and its backward.
//
// The unit of partition is a block (nodes labelled "blockN."): stage s holds
// the blocks [first_block[s], first_block[s+1]); the nodes before the first
// block (embeddings) belong to stage 0 and those after the last (final norm,
// head, loss) to the last stage. Parameters and inputs are copied into every
// stage that reads them: a parameter read by two stages (a tied embedding) is
// "tied", and its gradient is the sum of the stages' contributions.
//
// A stage graph reads the activations earlier stages send ("pipe.act.<id>"
// inputs, <id> being the producing node in the forward graph) and ends in
// the activations it sends on, or in the loss. Its backward starts from the
// gradients of what it sent ("pipe.grad.<id>" inputs: the surrogate loss
// sum(out * grad) has exactly those gradients) or, on the last stage, from
// loss / microbatches, so gradients accumulated over micro-batches are the
// gradients of the batch's mean loss. The graph is ordered forward, then
// backward; for zero-bubble schedules the backward is split into
// backward-input (what the earlier stage waits for) and backward-weight
// (parameter gradients nobody downstream waits for), so a runtime can run
// the three phases separately.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

struct StagePartition {
  int stages = 1;
  int blocks = 0;
  std::vector<int> first_block;           // per stage
  std::vector<int> stage_of_node;         // per forward node; -1 for inputs and parameters
  std::vector<double> predicted_seconds;  // per stage: forward + backward, roofline estimate
  std::vector<double> flops;              // per stage, forward only
};

// `first_blocks`: the block each stage after the first starts at (stages - 1
// increasing values in (0, blocks)); empty to balance the predicted time
// (contiguous blocks, minimising the slowest stage). Throws naming the
// stage count and block count when a stage would get no block.
StagePartition partition_stages(const Graph& forward, int stages,
                                const std::vector<int>& first_blocks = {});

struct StageGraph {
  int stage = 0;
  Graph graph;
  // Phase starts: node ids where backward-input and backward-weight begin
  // (graph.size() for an empty phase). Forward is [0, backward_input_begin).
  ValueId backward_input_begin = 0, backward_weight_begin = 0;
  std::vector<ValueId> activations_in;   // "pipe.act.<id>" inputs
  std::vector<ValueId> activations_out;  // values sent on, in forward-graph order
  std::vector<std::string> out_names;    // the receiving input's name for each
  std::vector<ValueId> gradients_in;     // "pipe.grad.<id>" inputs, aligned with activations_out
  std::vector<ValueId> gradients_out;    // d/d(activations_in), aligned with activations_in
  std::vector<ValueId> param_grads;      // aligned with graph.params()
  std::optional<ValueId> loss;           // last stage only: the micro-batch's mean loss
  std::optional<ValueId> logits;         // last stage, forward-only graphs: the logits asked for
};

struct StageGraphOptions {
  bool backward = true;
  int microbatches = 1;   // the backward is seeded with 1 / microbatches
  std::string recompute;  // a recompute policy (passes/recompute_policy.h); "" = none
  // Zero-bubble schedules run the backward as two actions (BI, then W
  // later): the weight gradients form their own phase, and what they read
  // stays alive from BI to W. Otherwise the backward is one phase in
  // autodiff order, so each block's weight gradients (and, with
  // recomputation, its recomputed activations) die with the block.
  bool split_weight_phase = false;
};

// One graph per stage. REQUIRES: `loss` is the forward graph's scalar loss.
// Throws when a value skips a stage (is read more than one stage after it is
// produced), naming the value and the stages.
// `logits` (optional, forward-only graphs): a last-stage value to expose.
std::vector<StageGraph> build_stage_graphs(const Graph& forward, ValueId loss,
                                           const StagePartition& partition,
                                           const StageGraphOptions& options,
                                           std::optional<ValueId> logits = std::nullopt);

}  // namespace tessel
