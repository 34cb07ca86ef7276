// `tessel train --dry-run`: every rank's predicted memory, without data,
// allocation or MPI, from the same compile a run makes (memory_report.h):
// one row per rank (or, past 16 ranks, per run of ranks with the same
// figures), the pipeline stages' arenas, and what the arenas hold at their
// peaks (arena_report.h) for one rank of each pipeline stage.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "tessel/base/error.h"
#include "tessel/compile/arena_report.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/pipeline_model.h"
#include "tessel/compile/recompute_choice.h"
#include "tessel/ir/model_contract.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/train/host_memory.h"

namespace tessel::cli {

namespace {

bool same_figures(const RankMemory& a, const RankMemory& b) {
  return a.parameters == b.parameters && a.optimizer == b.optimizer && a.arena == b.arena &&
         a.gradients == b.gradients && a.eval_arena == b.eval_arena && a.device() == b.device() &&
         a.host.total() == b.host.total() && a.accumulators == b.accumulators &&
         a.weight_copies == b.weight_copies && a.stages == b.stages && a.in_flight == b.in_flight &&
         a.stage_arena == b.stage_arena && a.stage_shared == b.stage_shared;
}

// Up to 16 ranks, one row each; more, runs of consecutive ranks with the
// same figures: [first, last] indices.
std::vector<std::pair<size_t, size_t>> rank_groups(const std::vector<RankMemory>& ranks) {
  std::vector<std::pair<size_t, size_t>> groups;
  for (size_t r = 0; r < ranks.size(); ++r)
    if (ranks.size() > 16 && !groups.empty() && same_figures(ranks[groups.back().second], ranks[r]))
      groups.back().second = r;
    else
      groups.emplace_back(r, r);
  return groups;
}

std::string rank_label(const std::vector<RankMemory>& ranks, std::pair<size_t, size_t> g) {
  return g.first == g.second ? std::to_string(ranks[g.first].rank)
                             : str_cat(ranks[g.first].rank, "-", ranks[g.second].rank);
}

void print_table(const std::vector<RankMemory>& ranks, const std::string& device) {
  std::printf("  %-9s %12s %12s %12s %14s %12s %13s %12s %12s %12s\n", "rank", "parameters",
              "optimizer", "arena", "(gradients)", "eval arena", "accumulators", "device", "host",
              "total");
  for (const auto& g : rank_groups(ranks)) {
    const RankMemory& m = ranks[g.first];
    std::printf("  %-9s %12s %12s %12s %14s %12s %13s %12s %12s %12s\n",
                rank_label(ranks, g).c_str(), format_bytes(m.parameters).c_str(),
                format_bytes(m.optimizer).c_str(), format_bytes(m.arena).c_str(),
                format_bytes(m.gradients).c_str(), format_bytes(m.eval_arena).c_str(),
                format_bytes(m.accumulators + m.weight_copies).c_str(),
                format_bytes(m.device()).c_str(), format_bytes(m.host.total()).c_str(),
                format_bytes(m.total()).c_str());
  }
  std::printf(
      "arena = the training step's activations + gradients + collective and einsum scratch "
      "(+ parameters gathered on use under --zero 3) at the planned peak\n"
      "accumulators = pipeline gradient accumulators (+ asynchronous weight copies); "
      "device = what the %s backend's device memory holds: the columns before it, ZeRO's update "
      "chunk and padded block%s; host = input batch staging + one full tensor for sharded "
      "checkpoints (+ on rank 0 the host copy asynchronous periodic saves write from; + with "
      "--offload optimizer, AdamW's moments and their staging; with --offload weights, the "
      "parameters (then 0 in the parameters column); with --offload activations, "
      "the values the backward reads, between forward and backward; with --collectives staged, "
      "the collectives' and pipeline transfers' staging; all pinned); total = "
      "device + host, the peak of tensor storage (code, libraries, data not included)\n",
      device.c_str(),
      device == "cuda" ? " and cuBLASLt's workspace (the CUDA context is not counted)" : "");
}

void print_stages(const TrainConfig& config, const std::vector<RankMemory>& ranks) {
  if (ranks.empty() || ranks.front().stages.empty()) return;
  std::printf(
      "pipeline (schedule %s, %lld micro-batches): gradient accumulators equal the "
      "parameters; per stage, one arena (the stashed activations) per micro-batch in "
      "flight, plus temporaries its micro-batches share\n",
      config.schedule.c_str(), static_cast<long long>(config.microbatches));
  for (const auto& g : rank_groups(ranks)) {
    const RankMemory& m = ranks[g.first];
    for (size_t i = 0; i < m.stages.size(); ++i)
      std::printf("  rank%s %s stage %d: %d in flight x %s + %s shared = %s\n",
                  g.first == g.second ? "" : "s", rank_label(ranks, g).c_str(), m.stages[i],
                  m.in_flight[i], format_bytes(m.stage_arena[i]).c_str(),
                  format_bytes(m.stage_shared[i]).c_str(),
                  format_bytes(m.in_flight[i] * m.stage_arena[i] + m.stage_shared[i]).c_str());
  }
}

// What the arenas hold, for the first rank of each pipeline rank (or rank 0).
void print_arena_contents(const TrainConfig& config) {
  const Mesh mesh = Mesh::parse(config.mesh);
  const Layout layout = layout_for(config, mesh);
  const int pipe = mesh.axis_index(kPipeAxis);
  std::printf("what the arenas hold at their peaks:\n");
  std::vector<int> seen;
  GraphCache cache;
  for (int r = 0; r < mesh.rank_count(); ++r) {
    const int stage = pipe >= 0 ? mesh.coords(r)[pipe] : 0;
    if (std::find(seen.begin(), seen.end(), stage) != seen.end()) continue;
    seen.push_back(stage);
    const CompiledRank compiled =
        compile_rank(config, mesh, layout, r, CompileMode::kPlanOnly, nullptr, &cache);
    std::printf("%s", describe_arenas(compiled).c_str());
  }
}

// Every rank's memory on this host (host_bytes_of) against the host's, were
// all to run here.
void print_host_fit(const std::vector<RankMemory>& ranks, const std::string& device) {
  const int64_t host = host_memory_bytes();
  if (host <= 0) return;
  int64_t need = 0;
  for (const RankMemory& m : ranks) need += host_bytes_of(m, device);
  std::printf("this host has %s of memory; the %zu rank(s), all run here, would hold %s (%s)\n",
              format_bytes(host).c_str(), ranks.size(), format_bytes(need).c_str(),
              need <= host ? "fits" : "does not fit: spread the ranks over more hosts");
}

}  // namespace

int run_dry(TrainConfig config) {
  if (const std::optional<RecomputeChoice> choice = resolve_recompute(config))
    std::printf("%s", choice->report().c_str());
  const std::vector<RankMemory> ranks = predict_memory(config);  // throws on a bad layout
  std::printf("predicted memory per rank (mesh %s, zero %d, recompute %s, precision %s):\n",
              config.mesh.empty() ? "single rank" : config.mesh.c_str(), config.zero,
              config.recompute.c_str(), config.precision.c_str());
  print_table(ranks, config.device);
  print_host_fit(ranks, config.device);
  if (config.precision == "bf16")
    std::printf("%s; the arena counts its scratch\n", kernels::bf16_matmul_note().c_str());
  print_stages(config, ranks);
  print_arena_contents(config);
  check_memory_limit(config);
  if (!config.memory_limit.empty())
    std::printf("fits in --memory-limit %s\n", config.memory_limit.c_str());
  return 0;
}

}  // namespace tessel::cli
