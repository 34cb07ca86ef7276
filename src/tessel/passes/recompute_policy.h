// Which activations a training graph recomputes instead of storing: the
// `recompute` config key, parsed, and the segments it gives the recompute
// pass (passes/recompute.h). Spellings:
//
//   none           store everything
//   selective      in each block, the values recomputed cheaply from values
//                  the backward keeps anyway: the attention core — the
//                  values with both a `seq` and a `kseq` dim (scores,
//                  softmax probabilities), from the stored q, k
//                  (Korthikanti et al. 2022) — the norms' outputs (from the
//                  residual stream) and the MLP's activation outputs (gelu,
//                  bias_gelu, silu, relu, and a mul gating one: SwiGLU's,
//                  from the pre-activations)
//   blocks         every block is a segment: only its input stays stored
//   blocks:K       segments of K consecutive blocks, only each segment's input
//                  stored (Chen et al.'s sqrt(n) checkpointing: K ~ sqrt(n_layer))
//   blocks:K:J     segments of K over the first J blocks only; the rest stored
//   ...+selective  with block segments: the attention core of the blocks they
//                  do not cover ("blocks:1:2+selective")
//   auto           not a policy: train/recompute_choice.h picks one of the
//                  above under `memory_limit`
//
// Blocks are the "blockN." labels (passes/block_label.h), so on a pipeline
// stage "the first J blocks" are the model's first J, whichever stage they
// are on. Invariant: parse(p.to_string()) == p.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tessel/passes/recompute.h"

namespace tessel {

struct RecomputePolicy {
  int group = 0;  // blocks per segment; 0: no block segments
  // Block segments cover blocks [0, first); absent: every block.
  std::optional<int> first = std::nullopt;
  bool selective = false;  // attention cores of the blocks no block segment covers

  bool none() const { return group == 0 && !selective; }
  // The canonical spelling ("none", "selective", "blocks", "blocks:2", "blocks:1:3+selective").
  std::string to_string() const;
  // Throws naming the key 'recompute' and the spelling; "auto" is an error here.
  static RecomputePolicy parse(const std::string& spec);
  // Throws naming 'recompute' and 'n_layer' when K or J exceeds the block count.
  void check_blocks(int64_t blocks) const;
  // "blocks<first block of the group>" or "block<N>.attention"; "" outside both.
  SegmentFn segments() const;

  bool operator==(const RecomputePolicy&) const = default;
};

}  // namespace tessel
