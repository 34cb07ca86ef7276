// Screening: the planner's first phase, a cheap step-time estimate for
// every candidate, good enough to rank them so that only the best few are
// compiled and costed exactly (search.h, `exact_top`).
//
// A GPT's blocks are identical, so a stage's phase costs are the sum of its
// blocks' plus the embedding's (first stage) and the head's (last stage);
// a stage's last block differs from the others (its output leaves the
// stage). A *unit* is a real plan-only compile of a 5-block model cut into
// four pipeline stages (embedding + block, block, 2 blocks, block + head) on
// a mesh of `pipe=4` and the candidate's model axis, for one micro-batch of
// the candidate's local rows, costed by the cost model (stage_phase_costs)
// with the model axis on the candidate's link: the one-block stage is a
// last block, the two-block stage minus it an inner block, the first minus
// it the embedding, the last minus it the head. A stage of k blocks costs
// embedding + (k - 1) inner + last + head. One unit serves every candidate
// with the same local rows, model-axis size, layout and recompute policy,
// whatever its pipe and data sizes, axis order, schedule, micro-batch
// count, chunks and ZeRO stage.
//
// Pipelines: stages are composed from the unit over the real partition
// (partition_stages on the full model's forward graph), the schedule's
// action lists run through simulate_schedule, then the per-step data-axis
// reduction, tied-embedding sum and optimizer update follow, as in the cost
// model. Single programs: the pieces' phase times in program order, the
// data-axis gradient buckets filled in backward order and all-reduced on one
// channel (ZeRO 1-3: blocking reduce-scatters; ZeRO 3: gathers), the feed
// and the update. Without a data axis ZeRO shards over the ctx axis
// (Layout::zero_axis), priced as on a data axis on the ctx axis's link.
// Invariant: lower_bound(c) <= estimate(c) (per pipeline rank its warm-up
// and all its work without waiting); the search skips a candidate whose
// bound exceeds the current best estimates.
// Approximated (the exact phase re-costs): bucket boundaries, the loss's
// scalar data-axis reduction, ZeRO slicing of dims the data axis does not
// divide, and the stage programs' boundary copies of a single program.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "tessel/compile/compile_rank.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

// One candidate as screening sees it (the search builds these without a
// TrainConfig per candidate; of() does it from one).
struct ScreenCandidate {
  int pipe = 1, data = 1, model = 1, ctx = 1;
  Link pipe_link = Link::kIntraNode, data_link = Link::kIntraNode, model_link = Link::kIntraNode,
       ctx_link = Link::kIntraNode;
  // "data", "tensor", "tensor+sequence", or with a ctx axis "data+context" or
  // "tensor+context" (context_layout), run by `context_parallel`.
  std::string layout_label, context_parallel;
  std::string schedule = "1f1b", recompute = "none";
  int chunks = 1, zero = 0;
  int64_t microbatches = 1;
  static ScreenCandidate of(const TrainConfig& c, const std::string& layout_label,
                            int devices_per_node);
};

// The layout of a mesh with a ctx axis: `seq` on it, beside data and tensor
// parallelism (`heads`: the model's heads dim, heads_dim_of).
std::string context_layout(bool data, bool model, const std::string& heads);

// Whether `strategy` can run on a ctx axis of `ctx` beside a model axis of
// `model`: ctx divides the context and, for all_to_all, a heads dim: the
// Llama's group (heads per kv head), or the model's heads (kv_heads) with
// no model axis or, where ctx comes after model in the mesh, cut further
// inside model's split (sharding/context_parallel.h).
bool context_axis_fits(const TrainConfig& base, int model, int ctx, const std::string& strategy,
                       bool ctx_after_model);

class Screener {
 public:
  Screener(const TrainConfig& base, const HardwareModel& hw, const CostOptions& options);
  ~Screener();

  // Whether screening can cost candidates of this model (a GPT, with the
  // layout searched and the recompute policy one of none, selective, blocks
  // or searched) on this hardware (communication that progresses in the
  // background, as on cluster files; screening does not model polled
  // progress, and on this machine's profiles it mis-ranked pipelines
  // against the exact model); otherwise every candidate is costed exactly.
  static bool applies(const TrainConfig& base, bool layout_fixed,
                      const std::string* fixed_recompute, const HardwareModel& hw);

  // A candidate that passed the shape checks. estimate() is the screening
  // step time; lower_bound() is below it and needs only one unit per model
  // axis size, layout and recompute policy (compiled for the most local
  // rows of any candidate with them, and scaled down to the candidate's: a kernel or collective on
  // r rows takes at least r / R of its time on R >= r rows when its efficiency does not fall with
  // size). Both throw as compile_rank does when the model cannot take the unit's layout. note()
  // every candidate before the first lower_bound(): the reference units are compiled for the most
  // rows any noted candidate has (compile time grows with rows x heads).
  void note(const ScreenCandidate& c);
  double lower_bound(const ScreenCandidate& c);
  double estimate(const ScreenCandidate& c);

  // Bytes a rank sends per step in a single program's ZeRO-3 parameter
  // all-gathers as estimate() counts them (each gathered once in forward and
  // once in backward where read there, 2 bytes an element where the gathered
  // copy is stored in bf16, Program::gathered_in_bf16, else 4): the exact
  // phase's payload.
  double zero3_gather_bytes(const ScreenCandidate& c);

  // A lower bound of the candidate's peak memory per rank (bytes): the
  // model states its most loaded rank holds whatever else it stores, 4
  // bytes a held parameter element (f32; divided over the data axis under
  // ZeRO 3) and, for AdamW, 8 bytes of moments (divided under ZeRO 1-3).
  // Gradients, activations and buffers are not counted.
  double state_bytes_bound(const ScreenCandidate& c);

  int units_compiled() const { return units_compiled_; }
  int schedules_simulated() const { return simulated_; }

 private:
  struct Piece;
  struct Unit;
  struct Units;
  const Unit& unit(int64_t rows, const ScreenCandidate& c);
  const Unit& reference(const ScreenCandidate& c, int64_t* rows);
  const std::vector<int>& first_blocks(int64_t rows, int stages);
  // The unit's pieces summed per stage of first_blocks(rows, stages).
  std::vector<Piece> stage_pieces(const Unit& u, int64_t rows, int stages);
  double collective(CollectiveKind kind, double bytes, int ranks, Link link) const;
  double update(double state, int world, double share) const;
  // One collective per parameter tensor of `piece`, of its mean size:
  // `wire` bytes an element, divided by `divide`, over `ranks` on `link`.
  double each_tensor(CollectiveKind kind, const Piece& piece, double divide, double wire, int ranks,
                     Link link) const;
  // A single program's ZeRO collectives: the blocking reduce-scatters
  // (and, over a ctx axis, the update's all-gathers) and ZeRO 3's gathers,
  // over the pieces in backward order (piece, times).
  double zero_collectives(const ScreenCandidate& c, const Unit& u,
                          const std::vector<std::pair<const Piece*, double>>& backward,
                          double share, double reduce_bytes) const;
  double pipeline(const ScreenCandidate& c, const Unit& u, bool simulate);
  double single_program(const ScreenCandidate& c, const Unit& u, bool exposed);

  TrainConfig base_;
  const HardwareModel& hw_;
  CostOptions options_;
  GraphCache unit_graphs_;
  // By (rows, model axis size, layout, recompute): the unit on each link.
  std::map<std::tuple<int64_t, int, std::string, std::string>, std::unique_ptr<Units>> units_;
  std::map<std::tuple<int, std::string, std::string, int>, std::unique_ptr<Unit>> references_;
  std::map<std::tuple<int, std::string, std::string>, int64_t> reference_rows_;
  std::map<std::tuple<int64_t, int>, std::vector<int>> partitions_;
  std::map<std::string, double> makespans_;
  int units_compiled_ = 0, simulated_ = 0;
};

}  // namespace tessel::plan
