#include "tessel/compile/recompute_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/model_registry.h"
#include "tessel/passes/recompute_policy.h"

namespace tessel {
namespace {

// How many costlier candidates past the chosen one are judged and shown.
constexpr int kRunnersUp = 2;

std::vector<RecomputePolicy> candidate_policies(int64_t blocks) {
  std::vector<RecomputePolicy> out = {RecomputePolicy{}};
  if (blocks < 1) return out;  // no blocks: nothing to recompute
  const int n = static_cast<int>(blocks);
  out.push_back({0, std::nullopt, true});
  for (int j = 1; j < n; ++j) {
    out.push_back({1, j, false});
    out.push_back({1, j, true});
  }
  for (int k = 1; k <= n; ++k) out.push_back({k, std::nullopt, false});
  return out;
}

std::string gflop(double flops) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", flops / 1e9);
  return text;
}

bool same_cost(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); }

// The candidate's policy and loss applied to `config`.
TrainConfig with(const TrainConfig& config, const RecomputeCandidate& c) {
  TrainConfig alt = config;
  alt.recompute = c.spec;
  if (c.fused_loss) alt.loss = "fused";
  return alt;
}

void judge(const TrainConfig& config, RecomputeCandidate& c) {
  const TrainConfig alt = with(config, c);
  c.memory.reset();
  for (const RankMemory& m : predict_memory(alt))
    if (const int64_t bytes = limited_bytes(m, config.device); !c.memory || bytes > *c.memory)
      c.memory = bytes, c.worst_rank = m.rank;
  TS_CHECK(c.memory, "recompute auto: no rank's memory predicted for '", c.spec, "'");
}

std::string table(const RecomputeChoice& choice) {
  char header[160];
  std::snprintf(header, sizeof header, "  %-24s %21s   %s\n", "candidate", "recomputed GFLOP/step",
                "predicted memory (worst rank)");
  std::string out = header;
  int unjudged = 0;
  for (const RecomputeCandidate& c : choice.candidates) {
    if (!c.memory) {
      ++unjudged;
      continue;
    }
    char line[160];
    const bool chosen = &c - choice.candidates.data() == static_cast<ptrdiff_t>(choice.chosen);
    const char* verdict = chosen                      ? "fits, chosen"
                          : *c.memory <= choice.limit ? "fits"
                                                      : "over the limit";
    std::snprintf(line, sizeof line, "  %-24s %21.3f   %12s on rank %d, %s\n", c.name().c_str(),
                  c.recomputed_flops / 1e9, format_bytes(*c.memory).c_str(), c.worst_rank, verdict);
    out += line;
  }
  if (unjudged > 0)
    out += str_cat("  (", unjudged, unjudged == 1 ? " costlier candidate" : " costlier candidates",
                   " not judged)\n");
  return out;
}

}  // namespace

std::vector<RecomputeCandidate> recompute_candidates(const TrainConfig& config) {
  TrainConfig base = config;
  base.recompute = "none";
  const TrainingGraph stored = build_training_graph(base, config.batch);
  // The fused loss recomputes the LM head's product (the unfused graph's "lm_head").
  std::optional<double> head_flops;
  if (is_builtin_transformer(config.model) && config.loss == "unfused")
    for (ValueId id = 0; id < static_cast<ValueId>(stored.graph.size()); ++id)
      if (stored.graph.node(id).name == "lm_head") head_flops = stored.graph.node_flops(id);
  std::vector<RecomputeCandidate> out;
  for (const RecomputePolicy& p :
       candidate_policies(is_builtin_transformer(config.model) ? config.n_layer : 0)) {
    TrainingGraph t = stored;
    apply_recompute(t, p);
    out.push_back({p.to_string(), false, t.recomputed_flops, std::nullopt, 0});
    if (head_flops)
      out.push_back({p.to_string(), true, t.recomputed_flops + *head_flops, std::nullopt, 0});
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.recomputed_flops < b.recomputed_flops;
  });
  return out;
}

RecomputeChoice choose_recompute(const TrainConfig& config) {
  if (config.memory_limit.empty())
    TS_THROW("config: 'recompute' \"auto\" needs 'memory_limit' (--memory-limit, e.g. 2GiB)");
  RecomputeChoice choice;
  choice.limit = parse_bytes(config.memory_limit);
  choice.candidates = recompute_candidates(config);
  std::vector<RecomputeCandidate>& all = choice.candidates;
  size_t i = 0;
  for (; i < all.size(); ++i) {
    judge(config, all[i]);
    if (*all[i].memory <= choice.limit) break;
  }
  if (i == all.size()) {
    const RecomputeCandidate& best = *std::min_element(
        all.begin(), all.end(), [](const auto& a, const auto& b) { return *a.memory < *b.memory; });
    choice.chosen = all.size();  // none
    const TrainConfig alt = with(config, best);
    TS_THROW("config: 'recompute' \"auto\": no recomputation fits the memory limit of ",
             format_bytes(choice.limit), " ('", config.memory_limit, "'); the smallest plan, ",
             best.name(), ", needs ", format_bytes(*best.memory), " on rank ", best.worst_rank,
             ": ", memory_breakdown(predict_memory(alt).at(best.worst_rank)), ". Candidates:\n",
             table(choice),
             "Use more ranks, --zero 1|2 over a data axis, or a schedule with fewer micro-batches "
             "in flight (1f1b)");
  }
  // Equal cost: the smallest memory; then the runners-up.
  size_t best = i, end = i + 1;
  for (; end < all.size() && same_cost(all[end].recomputed_flops, all[i].recomputed_flops); ++end) {
    judge(config, all[end]);
    if (*all[end].memory < *all[best].memory) best = end;
  }
  for (size_t k = end; k < all.size() && k < end + kRunnersUp; ++k) judge(config, all[k]);
  choice.chosen = best;
  return choice;
}

std::string RecomputeChoice::report() const {
  const RecomputeCandidate& c = chosen_candidate();
  const std::string why = c.recomputed_flops == 0 ? "the plan fits without recomputing anything"
                                                  : "no candidate that recomputes fewer FLOPs fits";
  return str_cat("recompute auto: chose ", c.name(), " (", format_bytes(c.memory.value()),
                 " on rank ", c.worst_rank, " within the limit of ", format_bytes(limit),
                 " per rank, ", gflop(c.recomputed_flops), " GFLOP/step recomputed): ", why, "\n",
                 table(*this));
}

}  // namespace tessel
