// The planner's context axis (search.h): for a model with fused attention it
// proposes `ctx` meshes with `seq` on ctx and both strategies, picks one
// where nothing else fits the memory limit (a long context), and never
// proposes a ctx size the context does not divide, nor all-to-all where no
// heads dim the ctx axis could split is left (docs/attention.md), nor one
// leaving a rank fewer than min_context_chunk positions; screening prices
// ctx candidates close to the exact phase.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "tessel/base/error.h"
#include "tessel/plan/profile/cluster_spec.h"
#include "tessel/plan/search/screen.h"
#include "tessel/plan/search/search.h"

namespace tessel::plan {
namespace {

ClusterSpec h100s() {
  return ClusterSpec::load(std::string(TESSEL_SOURCE_DIR) +
                           "/examples/clusters/grand-teton-h100-8.json");
}

TrainConfig small(const std::string& model, int64_t heads, int64_t kv_heads) {
  TrainConfig c =
      TrainConfig::from_file(std::string(TESSEL_SOURCE_DIR) + "/examples/gpt-bench.json");
  c.model = model, c.n_head = heads, c.n_kv_head = kv_heads, c.multiple_of = 64;
  c.attention = "fused";
  c.batch = 1;
  return c;
}

int ctx_of(const TrainConfig& c) { return Mesh::parse(c.mesh).size_of("ctx"); }

// Long context, batch 1, 3 heads on 2 ranks: no data axis (one row), no
// model axis (3 heads), and a pipeline's last stage holds the whole
// context's logits; ctx=2 by ring holds half of every activation.
TEST(ContextAxisSearch, ProposesCtxWhereItIsTheOnlyLayoutThatFitsTheMemory) {
  const ClusterSpec hw = h100s();
  PlanRequest q;
  q.base = small("gpt", 3, 0);
  q.base.n_layer = 2, q.base.d_model = 96, q.base.vocab = 4096, q.base.context = 4096;
  q.ranks = 2;
  q.exhaustive = true;  // 2,048 positions a rank: past the default min_context_chunk
  const PlanResult all = search_plans(q, hw);
  int64_t ctx_peak = -1, other_peak = -1;
  for (const Plan& p : all.plans) {
    int64_t& peak = ctx_of(p.config) > 1 ? ctx_peak : other_peak;
    if (peak < 0 || p.prediction.peak_bytes < peak) peak = p.prediction.peak_bytes;
  }
  std::printf("smallest peak with ctx %lld B, without %lld B\n", static_cast<long long>(ctx_peak),
              static_cast<long long>(other_peak));
  ASSERT_GT(ctx_peak, 0);
  ASSERT_GT(other_peak, ctx_peak) << "the case needs a ctx plan leaner than every other";

  q.exhaustive = false;  // the two-phase search, screening first
  q.memory_limit = (ctx_peak + other_peak) / 2;
  const PlanResult fit = search_plans(q, hw);
  EXPECT_GT(fit.screened, 0);
  ASSERT_FALSE(fit.plans.empty());
  for (const Plan& p : fit.plans) {
    EXPECT_EQ(p.config.mesh, "ctx=2") << p.command;
    EXPECT_EQ(p.config.layout, "seq=ctx") << p.command;
    EXPECT_EQ(p.config.context_parallel, "ring") << p.command;  // 3 heads: no all-to-all
    EXPECT_NE(p.command.find("--mesh ctx=2 --layout seq=ctx --set context_parallel=ring"),
              std::string::npos)
        << p.command;
    EXPECT_LE(p.prediction.peak_bytes, q.memory_limit);
  }
}

// Every plan of an exhaustive search (every candidate that compiles) against
// the rule: ctx divides the context; all-to-all needs a heads dim ctx
// divides: the Llama's query group, or the heads (kv_heads) that model leaves
// a rank (the planner lists ctx after model, so ctx cuts model's heads).
void expect_only_divisible_ctx(const TrainConfig& base, int ranks,
                               const std::set<std::string>& must_have) {
  PlanRequest q;
  q.base = base;
  q.ranks = ranks;
  q.exhaustive = true;
  q.min_context_chunk = 1;  // the short context keeps the compiles quick
  const PlanResult r = search_plans(q, h100s());
  // Pruned by the shape checks, not by a failed compile: every costed plan compiled.
  EXPECT_EQ(r.exact, static_cast<int>(r.plans.size()));
  std::set<std::string> seen;
  for (const Plan& p : r.plans) {
    const Mesh mesh = Mesh::parse(p.config.mesh);
    const int ctx = mesh.size_of("ctx"), model = mesh.size_of("model");
    if (ctx < 2) continue;
    const std::string& strategy = p.config.context_parallel;
    seen.insert(str_cat("ctx=", ctx, ",model=", model, " ", strategy));
    EXPECT_EQ(base.context % ctx, 0) << p.command;
    if (strategy == "all_to_all") {
      const int64_t kv = base.n_kv_head > 0 ? base.n_kv_head : base.n_head;
      const bool llama = base.model == "llama";
      EXPECT_GT(mesh.axis_index("ctx"), mesh.axis_index("model")) << p.command;
      EXPECT_TRUE(kv % (model * ctx) == 0 || (llama && (base.n_head / kv) % ctx == 0)) << p.command;
    } else {
      EXPECT_EQ(strategy, "ring") << p.command;
      EXPECT_EQ(base.context % (2 * ctx), 0) << p.command;  // 2 x ctx balanced halves
    }
  }
  for (const std::string& s : must_have) EXPECT_TRUE(seen.count(s)) << s;
}

TEST(ContextAxisSearch, NeverProposesACtxTheHeadsOrTheContextCannotDivide) {
  // GPT, 6 heads, context 36: ring at ctx=2 only (36 % 8 leaves no 8
  // balanced halves for ctx=4, 36 % 8 no ctx=8); all-to-all at ctx=2
  // without a model axis only (model=2 leaves 3 heads a rank).
  TrainConfig gpt = small("gpt", 6, 0);
  gpt.n_layer = 2, gpt.context = 36;
  expect_only_divisible_ctx(
      gpt, 4, {"ctx=2,model=1 all_to_all", "ctx=2,model=1 ring", "ctx=2,model=2 ring"});
  gpt.context = 48;  // 8 halves: ring at ctx=4 too
  expect_only_divisible_ctx(gpt, 8, {"ctx=4,model=2 ring", "ctx=4,model=1 ring"});
  gpt.n_head = 8;  // all-to-all beside model too: ctx cuts each model rank's 4 heads
  expect_only_divisible_ctx(gpt, 4, {"ctx=2,model=2 all_to_all", "ctx=4,model=1 all_to_all"});
  // Llama, 8 heads in 2 kv groups of 4: all-to-all splits kv_heads (ctx=2)
  // or the group (ctx=4, or beside model's kv_heads).
  TrainConfig llama = small("llama", 8, 2);
  llama.n_layer = 2, llama.context = 48;
  expect_only_divisible_ctx(llama, 4,
                            {"ctx=2,model=1 all_to_all", "ctx=4,model=1 all_to_all",
                             "ctx=2,model=2 all_to_all", "ctx=4,model=1 ring"});
}

// Without a data axis ZeRO shards over the ctx axis (Layout::zero_axis):
// the search proposes it where the model state is what does not fit, and
// screening prices it (the test below covers its error).
TEST(ContextAxisSearch, ProposesZeroOverTheCtxAxisWhereOnlyShardedStateFits) {
  const ClusterSpec hw = h100s();
  PlanRequest q;
  q.base = small("gpt", 3, 0);
  q.base.n_layer = 2, q.base.d_model = 384, q.base.vocab = 65536, q.base.context = 4096;
  q.ranks = 2;
  q.mesh = "ctx=2";
  q.exhaustive = true;
  q.min_context_chunk = 1;
  q.offload_fixed = true;  // offload, the other way to move the state, is weighed elsewhere
  const PlanResult all = search_plans(q, hw);
  int64_t unsharded = -1, sharded = -1;
  for (const Plan& p : all.plans) {
    int64_t& peak = p.config.zero > 0 ? sharded : unsharded;
    if (peak < 0 || p.prediction.peak_bytes < peak) peak = p.prediction.peak_bytes;
  }
  std::printf("smallest peak with ZeRO over ctx %lld B, without %lld B\n",
              static_cast<long long>(sharded), static_cast<long long>(unsharded));
  ASSERT_GT(sharded, 0) << "the search tried no ZeRO stage on a ctx-only mesh";
  ASSERT_GT(unsharded, sharded);

  q.exhaustive = false;
  q.memory_limit = (sharded + unsharded) / 2;
  const PlanResult fit = search_plans(q, hw);
  ASSERT_FALSE(fit.plans.empty());
  for (const Plan& p : fit.plans) {
    EXPECT_GT(p.config.zero, 0) << p.command;
    EXPECT_NE(p.command.find("--zero "), std::string::npos) << p.command;
    EXPECT_LE(p.prediction.peak_bytes, q.memory_limit);
  }
}

// By default a ctx size leaving a rank fewer than 1,024 positions is not searched.
TEST(ContextAxisSearch, LeavesEachRankAtLeastMinContextChunkPositions) {
  PlanRequest q;
  q.base = small("gpt", 8, 0);
  q.base.n_layer = 1, q.base.context = 2048;
  q.ranks = 4;
  q.exhaustive = true;
  std::set<int> sizes;
  for (const Plan& p : search_plans(q, h100s()).plans) sizes.insert(ctx_of(p.config));
  EXPECT_EQ(sizes, (std::set<int>{1, 2})) << "ctx=4 would leave 512 positions a rank";
  q.min_context_chunk = 512;
  sizes.clear();
  for (const Plan& p : search_plans(q, h100s()).plans) sizes.insert(ctx_of(p.config));
  EXPECT_EQ(sizes, (std::set<int>{1, 2, 4}));
}

// Screening's estimate of ctx candidates (units compiled with the ctx axis)
// against their exact predictions, and its lower bound below it.
TEST(ContextAxisSearch, ScreeningEstimatesCtxCandidatesCloseToTheExactPhase) {
  const ClusterSpec hw = h100s();
  for (const std::string model : {"gpt", "llama"}) {
    PlanRequest q;
    q.base = small(model, 8, model == "llama" ? 2 : 0);
    q.base.context = 1024, q.base.batch = 4;
    q.ranks = 4;
    q.exhaustive = true;
    q.min_context_chunk = 256;
    const PlanResult all = search_plans(q, hw);
    Screener screener(q.base, hw, q.cost);
    auto candidate = [&](const Plan& p) {  // the label without the strategy the plan adds
      const std::string label = p.layout_label.substr(0, p.layout_label.find(' '));
      return ScreenCandidate::of(p.config, label, hw.devices_per_node());
    };
    for (const Plan& p : all.plans) screener.note(candidate(p));
    std::vector<double> errors;
    for (const Plan& p : all.plans) {
      if (ctx_of(p.config) < 2) continue;
      const ScreenCandidate c = candidate(p);
      const double estimate = screener.estimate(c);
      EXPECT_LE(screener.lower_bound(c), estimate * (1 + 1e-12)) << p.command;
      errors.push_back(std::abs(estimate / p.prediction.step_s - 1));
    }
    ASSERT_GT(errors.size(), 20u);
    std::sort(errors.begin(), errors.end());
    const double median = errors[errors.size() / 2], p90 = errors[errors.size() * 9 / 10];
    std::printf("%s: screening error over %zu ctx candidates: median %.2f%%, 90th %.2f%%\n",
                model.c_str(), errors.size(), 100 * median, 100 * p90);
    EXPECT_LT(median, 0.02);
    EXPECT_LT(p90, 0.05);
  }
}

}  // namespace
}  // namespace tessel::plan
