// `recompute: auto`: the recomputation that fits the per-rank memory budget
// (`memory_limit`) while recomputing the fewest forward FLOPs.
//
// Candidates (passes/recompute_policy.h), from the cheapest: none,
// selective, the first J blocks as segments with and without selective on
// the others (J = 1 .. n_layer-1), every block, and groups of K blocks
// (Chen et al.'s sqrt(n) checkpointing; K = 2 .. n_layer); for the GPT and
// the Llama with `loss: unfused`, each again with `loss: fused` (the
// logits recomputed in the backward: the LM head's forward FLOPs more, its
// logits never stored; docs/memory.md). A candidate's cost
// is the forward FLOPs its clones recompute per step, counted on the whole
// model's training graph (node_flops of the cloned nodes), so it does not
// depend on the layout; its memory is the real static plan of the worst
// rank (predict_memory, pipelines included). Candidates are judged in cost
// order and the first that fits wins (among equal costs, the smallest
// memory): no cheaper candidate fits. Deterministic, so every rank makes the
// same choice without communicating.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessel/compile/config.h"

namespace tessel {

struct RecomputeCandidate {
  std::string spec;               // a policy's canonical spelling
  bool fused_loss = false;        // with `loss: fused`
  double recomputed_flops = 0;    // per training step, whole model
  std::optional<int64_t> memory;  // worst rank's predicted total; none: not judged
  int worst_rank = 0;
  std::string name() const { return fused_loss ? spec + " + loss fused" : spec; }
};

struct RecomputeChoice {
  size_t chosen = 0;                           // index into candidates (past them: none)
  int64_t limit = 0;                           // bytes per rank
  std::vector<RecomputeCandidate> candidates;  // in cost order; the judged ones have memory
  const RecomputeCandidate& chosen_candidate() const { return candidates.at(chosen); }
  // Lines for `train` and `--dry-run`: the choice, why, and the judged candidates.
  std::string report() const;
};

// Every candidate for the config's model with its cost, in cost order (not judged).
std::vector<RecomputeCandidate> recompute_candidates(const TrainConfig& config);

// REQUIRES: config.memory_limit is set. Throws, before any compute, when no
// candidate fits: the smallest candidate's breakdown and every candidate's memory.
RecomputeChoice choose_recompute(const TrainConfig& config);

}  // namespace tessel
