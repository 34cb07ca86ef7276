#include "tessel/compile/arena_report.h"

#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/pipeline_model.h"
#include "tessel/runtime/program.h"

namespace tessel {

namespace {

std::string kinds(const Program::MemoryBreakdown& b) {
  std::string out = str_cat("activations and gradients ", format_bytes(b.values));
  const std::pair<const char*, size_t> parts[] = {
      {"bf16 copies", b.bf16_copies},
      {"bf16 staging", b.staging},
      {"kernel and collective scratch", b.scratch},
      {"gradient buckets", b.buckets},
      {"shared bf16 weight copies", b.shared_weight_copies}};
  for (const auto& [name, bytes] : parts)
    if (bytes > 0) out += str_cat(", ", name, " ", format_bytes(bytes));
  return out;
}

std::string largest(const Program& p, const Program::MemoryBreakdown& b) {
  std::string out;
  for (size_t i = 0; i < b.largest.size() && i < 3; ++i)
    out += str_cat(i ? ", " : "", p.graph().node(b.largest[i].first).name, " ",
                   format_bytes(static_cast<int64_t>(b.largest[i].second)));
  return out.empty() ? "none" : out;
}

std::string at_peak(const Program& p, const Program::MemoryBreakdown& b) {
  if (b.peak_node < 0) return "";
  return str_cat(" (before '", p.graph().node(b.peak_node).name, "')");
}

}  // namespace

std::string describe_arenas(const CompiledRank& compiled) {
  std::string out;
  if (!compiled.pipelined()) {
    const Program& p = *compiled.train.program;
    const Program::MemoryBreakdown b = p.memory_breakdown(/*phase_local=*/false);
    out += str_cat("  rank ", compiled.rank, " arena ", format_bytes(b.planned), ", at its peak",
                   at_peak(p, b), ": ", kinds(b), "; largest: ", largest(p, b), "\n");
    return out;
  }
  const PipelineModel& model = *compiled.pipeline;
  for (size_t k = 0; k < model.stages().size(); ++k) {
    const Program& p = *model.compiled_stages()[k].instances.front();
    const Program::MemoryBreakdown stash = p.memory_breakdown(/*phase_local=*/false);
    const Program::MemoryBreakdown local = p.memory_breakdown(/*phase_local=*/true);
    out += str_cat("  rank ", compiled.rank, " stage ", model.stages()[k].graph.stage,
                   ": per micro-batch in flight ", format_bytes(stash.planned),
                   " (values kept from its forward to its backward: ", kinds(stash),
                   "; largest: ", largest(p, stash), ")\n");
    out += str_cat("    shared by its micro-batches ", format_bytes(local.planned), ", at its peak",
                   at_peak(p, local), ": ", kinds(local), "; largest: ", largest(p, local), "\n");
  }
  return out;
}

}  // namespace tessel
