// The label convention that marks a model's repeated blocks.
//
// Models label every node of their N-th transformer block "blockN.<...>"
// (GraphBuilder scopes do this). Passes that work block by block — the
// pipeline partition, recomputation — read the block index back from the
// label; nothing else about a node's label is interpreted.
#pragma once

#include <string>

namespace tessel {

// "block12.attn.q" -> 12; -1 for labels outside any block ("emb", "block",
// "blockx.q", "block3" without a dot).
int block_of_label(const std::string& label);

}  // namespace tessel
