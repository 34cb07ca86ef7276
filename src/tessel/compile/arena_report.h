// What a rank's arenas hold at their peaks, in words, for the dry run:
// per program (or pipeline stage), the bytes live at the peak instruction
// by kind (activations and gradients, bf16 copies, staging, kernel and
// collective scratch, gradient buckets) and the largest values, from the
// same plans the run allocates (Program::memory_breakdown).
#pragma once

#include <string>

namespace tessel {

struct CompiledRank;

// Several lines, each starting with two spaces and ending with a newline.
std::string describe_arenas(const CompiledRank& compiled);

}  // namespace tessel
