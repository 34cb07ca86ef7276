#include "tessel/compile/compile_rank.h"

#include "tessel/autodiff/backward.h"
#include "tessel/base/error.h"
#include "tessel/compile/cuda_gate.h"
#include "tessel/compile/distributed.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/zero.h"
#include "tessel/passes/recompute.h"
#include "tessel/train/threads.h"

namespace tessel {

TrainingGraph build_training_graph(const TrainConfig& config, int64_t batch) {
  TrainingGraph t;
  GraphBuilder b(t.graph);
  t.outputs = build_model(config, b, batch, /*training=*/true);
  std::map<ValueId, ValueId> grads = build_backward(b, t.outputs.loss, t.graph.params());
  for (ValueId p : t.graph.params()) t.grads.push_back(grads.at(p));
  apply_recompute(t, RecomputePolicy::parse(config.recompute));
  return t;
}

void apply_recompute(TrainingGraph& t, const RecomputePolicy& policy) {
  if (policy.none()) return;
  TS_CHECK(t.recomputed_flops == 0, "recompute: the graph is already recomputed");
  RecomputeResult r = recompute_segments(t.graph, t.outputs.loss + 1, policy.segments());
  t.graph = std::move(r.graph);
  t.outputs.loss = r.remap[t.outputs.loss];
  if (t.outputs.logits) t.outputs.logits = r.remap[*t.outputs.logits];
  for (ValueId& g : t.grads) g = r.remap[g];
  t.recomputed_flops = r.recomputed_flops;
}

LoweringOptions training_lowering(const TrainingGraph& t, const TrainConfig& config,
                                  const Layout& layout, const Mesh& mesh) {
  return {zero_targets(t.graph, t.grads, layout, mesh, config.zero), t.outputs.loss};
}

Layout layout_for(const TrainConfig& config, const Mesh& mesh) {
  Layout layout =
      config.layout.empty() ? Layout::defaults(mesh) : Layout::parse(config.layout, mesh);
  for (const auto& [label, spec] : config.shard) layout.set_override(label, spec, mesh);
  if (!config.context_parallel.empty())
    layout.set_context_parallel(parse_context_parallel(config.context_parallel));
  return layout;
}

std::optional<RecomputeChoice> resolve_recompute(TrainConfig& config) {
  if (config.recompute != "auto") return std::nullopt;
  RecomputeChoice choice = choose_recompute(config);
  config.recompute = choice.chosen_candidate().spec;
  if (choice.chosen_candidate().fused_loss) config.loss = "fused";
  return choice;
}

namespace {

// Lowers `p.global` to `c`'s rank and compiles the program that computes
// `p.wanted`. `gradients`: wanted values other than the loss are parameter
// gradients, whose all-reduces grad_reduce_precision may carry in bf16.
void compile_program(CompiledProgram& p, const CompiledRank& c, const LoweringOptions& lowering,
                     DistributedContext* ctx, bool gradients) {
  p.local = lower_to_rank(p.global, p.wanted, c.mesh, c.layout, c.rank, lowering);
  std::vector<ValueId> local_outputs;
  for (ValueId v : p.wanted) local_outputs.push_back(p.local.local_of[v]);
  CompileOptions options = precision_compile_options(c.config);
  options.plan_only = c.mode == CompileMode::kPlanOnly;  // the run's plan, buckets included
  options.comms = ctx ? &ctx->groups() : nullptr;
  options.bucket_bytes = static_cast<size_t>(c.config.bucket_mib * 1048576.0);
  if (gradients && offloads(c.config, "activations"))
    options.offload_from = p.local.first_local_at(p.outputs.loss + 1);
  if (gradients && c.config.grad_reduce_precision == "bf16")
    for (ValueId v : p.wanted)
      if (v != p.outputs.loss) options.bf16_reduce.insert(p.local.local_of[v]);
  p.program = std::make_unique<Program>(p.local.graph, local_outputs, options);
}

}  // namespace

CompileOptions precision_compile_options(const TrainConfig& config) {
  CompileOptions options;
  options.backend = &backend_for(config.device);
  refuse_unrunnable_device(config);  // what the CUDA backend cannot run yet
  options.bf16 = config.precision == "bf16";
  options.bf16_activations = config.bf16_activations;
  options.bf16_partial_sums = config.tp_comm_precision == "bf16";
  options.threads = resolve_threads(config.threads);  // what the trainer runs on
  return options;
}

CompiledRank compile_rank(const TrainConfig& config, const Mesh& mesh, const Layout& requested,
                          int rank, CompileMode mode, DistributedContext* ctx, GraphCache* cache) {
  TS_CHECK(rank >= 0 && rank < mesh.rank_count(), "rank ", rank, " is not a rank of mesh ",
           mesh.to_string());
  TS_CHECK((mode == CompileMode::kRun) == (ctx != nullptr),
           "compile_rank: a program that runs needs its rank's communicators, a plan none");
  CompiledRank c;
  c.config = config;
  c.mesh = mesh;
  c.layout = requested;
  c.rank = rank;
  c.mode = mode;
  c.recompute_choice = resolve_recompute(c.config);
  const TrainConfig& cfg = c.config;
  if (cfg.grad_reduce_precision == "bf16" && uses_pipeline(cfg, mesh))
    TS_THROW(
        "config: 'grad_reduce_precision' bf16 reduces the gradients of a run without "
        "pipeline (all-reduce buckets, ZeRO's reduce-scatters); this run has a pipeline (a "
        "'pipe' axis or microbatches > 1), whose gradient reductions stay f32. Use "
        "grad_reduce_precision f32 here");
  if (uses_pipeline(cfg, mesh)) {
    c.pipeline = ctx ? std::make_unique<PipelineModel>(cfg, *ctx)
                     : std::make_unique<PipelineModel>(cfg, mesh, rank, nullptr, true,
                                                       cache ? &cache->pipelines : nullptr);
    c.flops_per_step = c.pipeline->flops_per_step();
    return c;
  }

  // Training: loss and every parameter's gradient.
  TrainingGraph t;
  if (cache) {
    auto key = std::make_tuple(cfg.recompute, cfg.batch);
    auto it = cache->training.find(key);
    if (it == cache->training.end())
      it = cache->training.emplace(key, build_training_graph(cfg, cfg.batch)).first;
    t = it->second;
  } else {
    t = build_training_graph(cfg, cfg.batch);
  }
  // The defaults by axis name keep only the dims this model has.
  c.layout.drop_absent_defaults(t.graph);
  const Layout& layout = c.layout;
  layout.validate(t.graph, mesh);
  c.flops_per_step = t.graph.flops(std::vector<bool>(t.graph.size(), true));
  c.grads = t.grads;
  c.recomputed_flops = t.recomputed_flops;
  const LoweringOptions train_lowering = training_lowering(t, cfg, layout, mesh);
  c.train.outputs = t.outputs;
  c.train.outputs.logits.reset();  // the training program needs only the loss and gradients
  c.train.wanted = {t.outputs.loss};
  c.train.wanted.insert(c.train.wanted.end(), t.grads.begin(), t.grads.end());
  c.train.global = std::move(t.graph);
  compile_program(c.train, c, train_lowering, ctx, true);

  // Evaluation: forward only, reading the same parameter storage (ZeRO-3
  // shards are gathered on use there too). A plan needs only its arena.
  std::string eval_key;
  if (cache && mode == CompileMode::kPlanOnly) {
    eval_key = str_cat(mesh.to_string(), "|", cfg.layout, "|", rank, "|", cfg.zero, "|", cfg.batch,
                       "|", cfg.precision, "|", cfg.bf16_activations, "|",
                       cfg.grad_reduce_precision, "|", cfg.tp_comm_precision, "|", cfg.bucket_mib);
    for (const auto& [label, spec] : cfg.shard) eval_key += str_cat("|", label, "=", spec);
    eval_key += "|" + cfg.context_parallel;
    if (auto it = cache->eval_arena_bytes.find(eval_key); it != cache->eval_arena_bytes.end()) {
      c.eval_arena_bytes = it->second;
      return c;
    }
  }
  GraphBuilder eb(c.eval.global);
  c.eval.outputs = build_model(cfg, eb, cfg.batch, /*training=*/false);
  c.eval.wanted = {c.eval.outputs.loss};
  if (c.eval.outputs.logits) c.eval.wanted.push_back(*c.eval.outputs.logits);
  LoweringOptions eval_lowering;
  eval_lowering.targets = zero_targets(c.eval.global, {}, layout, mesh, cfg.zero);
  compile_program(c.eval, c, eval_lowering, ctx, false);
  c.eval_arena_bytes = c.eval.program->arena_bytes();
  if (!eval_key.empty()) cache->eval_arena_bytes[eval_key] = c.eval_arena_bytes;
  return c;
}

}  // namespace tessel
