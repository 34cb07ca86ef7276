// The planner's search: every configuration of N ranks a user could write,
// pruned, costed, ranked.
//
// Knobs: the mesh (every factorization of N into pipe x data x model x ctx,
// ctx for models with fused attention, and the order of its axes), the
// layout (data parallel; Megatron tensor parallel; tensor + sequence
// parallel; with ctx, seq on it by ring or all-to-all), the pipeline schedule (gpipe,
// 1f1b, interleaved with 2 chunks, zb-h1) and micro-batches, the ZeRO stage
// and the recompute policy. A knob given in the request is fixed; the rest
// are searched. Candidates that cannot work are pruned before any compile
// (a model axis that does not divide the heads, micro-batch rows the data
// axis cannot split, more stages than blocks); the survivors are screened
// (screen.h) and the best `exact_top` compiled plan-only (compile_rank) for
// their representative ranks, their memory checked against the limit and
// the device, and their step predicted (cost_model.h). Deterministic: every
// rank of a run makes the same choice.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessel/compile/config.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

struct PlanRequest {
  TrainConfig base;         // the model and optimisation keys
  std::string config_path;  // for the command line of each plan
  // The user's `--set KEY=VALUE` overrides (already applied to `base`). Each
  // plan's command repeats those of keys the plan does not choose (e.g.
  // precision=bf16), so the command trains what was planned; those of the
  // knobs it chooses (mesh, zero, recompute, ...) are dropped.
  std::vector<std::string> overrides;
  int ranks = 1;
  int64_t memory_limit = 0;  // bytes per rank; 0: none but the device's memory
  // Prune by the device's memory (HardwareModel::device_memory_bytes) and
  // a node's host memory (host_memory_bytes: the largest rank's host
  // buffers times the ranks on a node). Off
  // only to time configurations Tessel's own plan could not hold (a
  // published run's exact configuration); their peak is still reported.
  bool check_device_memory = true;
  // Plan more ranks than the hardware has devices (oversubscribed runs on
  // this machine; ranks sharing a core are costed at their share of it).
  bool oversubscribe = false;
  // Fixed knobs; unset ones are searched.
  std::optional<std::string> mesh, layout, schedule, recompute;
  // Offload (config key `offload`: activations; with AdamW also optimizer,
  // optimizer,weights, and each of those with activations) is
  // searched only on hardware whose host memory is not the device's (a
  // cluster file), and only where it competes with recomputation: when no
  // plan fits without it, or when the fastest plan that fits recomputes.
  // Its plans are ranked with the others by predicted step. Fixed by
  // --offload, or by a config that sets it.
  bool offload_fixed = false;
  std::optional<int> chunks, microbatches, zero;
  // The fewest context positions a ctx axis leaves each rank: smaller chunks
  // are not searched (their ring steps and all-to-alls are latency, and
  // each ctx size multiplies the meshes searched).
  int64_t min_context_chunk = 1024;
  CostOptions cost;
  // Two phases: every candidate is screened (screen.h: a cheap estimate
  // from one-block units), then the best by that estimate are compiled
  // (compile_ranks on the representative ranks), predicted exactly
  // (predict_compiled) and re-ranked by the exact prediction: at least
  // `exact_top` of them (while fewer fit the memory limit, the next), and
  // further ones while a candidate's estimate is within `screen_margin` of
  // the `exact_top`-th best exact step, up to 4 x exact_top in all. While
  // fewer than `exact_top` of those fit the memory limit, up to 12 x
  // exact_top more, memory-lean plans first (search.cc, lean_sibling). The
  // plans returned are the exactly costed ones, so every reported step and
  // peak is exact.
  int exact_top = 10;
  double screen_margin = 0.03;  // screening's error on gpt-bench: -2.3% to +1.4%
  // Cost every candidate exactly (the reference the two phases are tested
  // against). Also what happens when at most `exact_top` candidates pass the
  // shape checks, or when screening cannot model the config (not a GPT, a
  // fixed layout, a fixed recompute policy other than none, selective, blocks).
  bool exhaustive = false;
  // Share compiles between candidates whose programs are the same: the
  // stage graphs of a pipeline across ranks and meshes, and one pipeline
  // compile for ZeRO 0, 1 and 2. Predictions are identical either way (a
  // test compares them); off only to check that.
  bool share_compiles = true;
};

struct Plan {
  TrainConfig config;  // the run: mesh, layout, schedule, chunks, microbatches, zero, recompute
  std::string layout_label;  // "data", "tensor", "tensor+sequence", or the fixed layout
  StepPrediction prediction;
  double tokens_per_s = 0;
  double tflops_per_device = 0;  // model FLOPs (recomputation not counted) per second per rank
  double fraction_of_peak = 0;
  std::string command;  // the line that runs it
};

struct PlanResult {
  std::vector<Plan> plans;  // every exactly costed candidate that fits, fastest first
  int considered = 0;       // candidates generated
  int pruned = 0;    // of which dropped (divisibility, a layout the model cannot take, memory)
  int screened = 0;  // estimated by screening (0 when every candidate is costed exactly)
  int bounded = 0;   // skipped by screening: their lower bound exceeds the kept estimates
  int exact = 0;     // compiled and costed exactly
  // Skipped by the extension (fewer than exact_top fit): model states over
  // the limit, or a leaner plan of the same mesh, layout, schedule and
  // micro-batches over it (search.cc, lean_sibling).
  int memory_bounded = 0;
  // Of `pruned`: plans within the device's memory whose host buffers exceed
  // a node's host memory (HardwareModel::host_memory_bytes), and the least
  // host memory per node such a plan needs.
  int host_bounded = 0;
  int64_t least_host_need = 0;
  int units = 0;      // screening's unit compiles
  int simulated = 0;  // screening's schedule simulations
  double search_s = 0;
  std::string hardware;  // HardwareModel::name()
};

// Throws when nothing fits (with offload too, where it is searched), naming
// what was tried and what came closest (the smallest peak memory found, and
// its knobs).
PlanResult search_plans(const PlanRequest& request, const HardwareModel& hw);

// Whether two predicted steps are equal as `tessel plan` prints them (to
// 0.01 ms): such plans tie, and the smaller peak memory ranks first.
bool same_step_as_printed(const StepPrediction& a, const StepPrediction& b);
// The plans' order: the faster step first; steps equal as printed
// (same_step_as_printed), the smaller peak memory, then the smaller
// `generation` (the order candidates were generated in: a stable key).
bool ranks_before(const StepPrediction& a, int a_generation, const StepPrediction& b,
                  int b_generation);

// The config keys a plan sets, as `tessel train` flags.
std::string plan_flags(const TrainConfig& config);

}  // namespace tessel::plan
