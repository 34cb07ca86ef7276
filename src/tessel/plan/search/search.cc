#include "tessel/plan/search/search.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/model_registry.h"
#include "tessel/plan/format_size.h"
#include "tessel/plan/model/exact_cost.h"
#include "tessel/plan/search/no_fit.h"
#include "tessel/plan/search/screen.h"
#include "tessel/schedule/schedule.h"

namespace tessel::plan {
namespace {

// (pipe, data, model, ctx) with pipe * data * model * ctx = n, ctx one of `ctxs`.
std::vector<std::array<int, 4>> factorizations(int n, const std::vector<int>& ctxs) {
  std::vector<std::array<int, 4>> out;
  for (int c : ctxs)
    for (int p = 1; n % c == 0 && p <= n / c; ++p)
      if (n / c % p == 0)
        for (int d = 1; d <= n / c / p; ++d)
          if ((n / c / p) % d == 0) out.push_back({p, d, n / c / p / d, c});
  return out;
}

// The divisors of n, ascending.
std::vector<int> divisors(int n) {
  std::vector<int> low, high;
  for (int d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      low.push_back(d);
      if (d != n / d) high.push_back(n / d);
    }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// Every order of the axes larger than 1 (only the canonical pipe, data,
// model, ctx order when every rank shares one node: the order changes nothing).
std::vector<std::string> mesh_texts(const std::array<int, 4>& sizes, bool one_node) {
  std::vector<MeshAxis> axes;
  const char* names[] = {"pipe", "data", "model", "ctx"};
  for (int i = 0; i < 4; ++i)
    if (sizes[i] > 1) axes.push_back({names[i], sizes[i]});
  std::vector<int> order(axes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::vector<std::string> out;
  do {
    std::vector<MeshAxis> ordered;
    for (int i : order) ordered.push_back(axes[i]);
    out.push_back(ordered.empty() ? std::string() : Mesh(ordered).to_string());
  } while (!one_node && std::next_permutation(order.begin(), order.end()));
  return out;
}

// `heads`: the model's attention-head dim ("kv_heads" for Llama). With a
// ctx axis, `seq` on it (and no sequence parallelism: a dim has one axis).
std::vector<std::pair<std::string, std::string>> layouts(const Mesh& mesh,
                                                         const std::string& heads) {
  const bool data = mesh.axis_index("data") >= 0, model = mesh.axis_index("model") >= 0;
  if (mesh.axis_index("ctx") >= 0)
    return {{model ? "tensor+context" : "data+context", context_layout(data, model, heads)}};
  if (!model) return {{"data", ""}};
  const std::string seq =
      std::string(data ? "batch=data," : "") + heads + "=model,hidden=model,vocab=model,seq=model";
  return {{"tensor", ""}, {"tensor+sequence", seq}};
}

// One mesh of the search, with what the candidates on it share.
struct MeshChoice {
  std::string text;
  ScreenCandidate shape;  // sizes and links (the other fields per candidate)
  std::vector<std::pair<std::string, std::string>> layouts;  // (label, layout)
  bool ctx_after_model = false;  // all-to-all may cut model's heads further
};

// A candidate as indices into the search space (a TrainConfig is built
// only for those costed exactly: at scale there are a million candidates).
struct Knobs {
  int mesh, layout, strategy, schedule, recompute, chunks, microbatches, zero;
};

struct Space {
  std::vector<MeshChoice> meshes;
  std::vector<std::string> schedules, recomputes, strategies;
  std::vector<Knobs> knobs;  // in generation order
};

int index_of(std::vector<std::string>& names, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  names.push_back(name);
  return static_cast<int>(names.size()) - 1;
}

// Model chunks per pipeline rank: --chunks, else 1, or for the interleaved
// schedule 2 and 4 (more chunks shrink its bubble and grow its stash; a
// count with more chunks than layers is dropped as invalid).
std::vector<int> chunk_counts(const PlanRequest& q, const std::string& schedule) {
  if (q.chunks) return {*q.chunks};
  if (schedule != "interleaved") return {1};
  return {2, 4};
}

// The ctx axis sizes searched: 1, and for a model with fused attention and
// a searched layout every divisor of the context and the ranks past 1 that
// leaves each rank min_context_chunk positions.
std::vector<int> context_degrees(const PlanRequest& q) {
  std::vector<int> out = {1};
  if (is_builtin_transformer(q.base.model) && q.base.attention == "fused" && !q.layout)
    for (int c : divisors(q.ranks))
      if (c > 1 && q.base.context % c == 0 && q.base.context / c >= q.min_context_chunk)
        out.push_back(c);
  return out;
}

// How attention runs on a ctx axis: the config's context_parallel, or both
// strategies ("" without a ctx axis: the config's own value stays).
std::vector<std::string> strategies(const TrainConfig& base, const Mesh& mesh) {
  if (mesh.axis_index("ctx") < 0) return {""};
  if (!base.context_parallel.empty()) return {base.context_parallel};
  return {"all_to_all", "ring"};
}

Space candidates(const PlanRequest& q, bool one_node, int devices_per_node) {
  std::vector<std::string> meshes;
  if (q.mesh) {
    meshes.push_back(*q.mesh);
  } else {
    for (const auto& f : factorizations(q.ranks, context_degrees(q)))
      for (const std::string& m : mesh_texts(f, one_node)) meshes.push_back(m);
  }
  Space out;
  for (const std::string& mesh_text : meshes) {
    const Mesh mesh = Mesh::parse(mesh_text);
    if (mesh.rank_count() != q.ranks)
      TS_THROW("plan: --mesh ", mesh_text, " has ", mesh.rank_count(), " ranks, not ", q.ranks);
    TrainConfig shape;
    shape.mesh = mesh_text;
    MeshChoice choice{mesh_text,
                      ScreenCandidate::of(shape, "", devices_per_node),
                      {},
                      mesh.axis_index("ctx") > mesh.axis_index("model")};
    choice.layouts = q.layout
                         ? std::vector<std::pair<std::string, std::string>>{{*q.layout, *q.layout}}
                         : layouts(mesh, heads_dim_of(q.base.model));
    const int pipe = choice.shape.pipe;
    const bool data = mesh.axis_index("data") >= 0;
    std::vector<std::string> schedules = {"1f1b"};
    if (q.schedule)
      schedules = {*q.schedule};
    else if (pipe > 1)
      schedules = {"gpipe", "1f1b", "interleaved", "zb-h1"};
    // Every divisor of the rows a data rank holds (micro-batch size 1
    // included); without a pipe axis, more than one is gradient accumulation.
    const std::vector<int> micro =
        q.microbatches ? std::vector<int>{*q.microbatches}
                       : divisors(q.base.batch % choice.shape.data == 0
                                      ? static_cast<int>(q.base.batch / choice.shape.data)
                                      : 1);
    // ZeRO shards over the data axis, or, in a single program without one,
    // over the ctx axis (Layout::zero_axis; shape_fits drops micro-batches).
    std::vector<int> zeros = {0};
    if (q.zero)
      zeros = {*q.zero};
    else if (data || (pipe == 1 && choice.shape.ctx > 1))
      zeros = {0, 1, 2, 3};
    const std::vector<std::string> recomputes =
        q.recompute ? std::vector<std::string>{*q.recompute}
                    : std::vector<std::string>{"none", "selective", "blocks"};
    const int mesh_index = static_cast<int>(out.meshes.size());
    for (int layout = 0; layout < static_cast<int>(choice.layouts.size()); ++layout)
      for (const std::string& strategy : strategies(q.base, mesh))
        for (const std::string& schedule : schedules)
          for (int m : micro)
            for (int zero : zeros)
              for (const std::string& recompute : recomputes)
                for (int chunks : chunk_counts(q, schedule))
                  out.knobs.push_back({mesh_index, layout, index_of(out.strategies, strategy),
                                       index_of(out.schedules, schedule),
                                       index_of(out.recomputes, recompute), chunks, m, zero});
    out.meshes.push_back(std::move(choice));
  }
  return out;
}

// Candidate k as a plan to cost: its config and layout label (finish_plan
// fills in the rest).
Plan materialize(const PlanRequest& q, const Space& space, const Knobs& k) {
  const MeshChoice& mesh = space.meshes[k.mesh];
  Plan p;
  p.config = q.base;
  p.layout_label = mesh.layouts[k.layout].first;
  p.config.mesh = mesh.text;
  p.config.layout = mesh.layouts[k.layout].second;
  p.config.schedule = space.schedules[k.schedule];
  p.config.chunks = k.chunks;
  p.config.microbatches = k.microbatches;
  p.config.zero = k.zero;
  p.config.recompute = space.recomputes[k.recompute];
  if (mesh.shape.ctx > 1) {
    p.config.context_parallel = space.strategies[k.strategy];
    p.layout_label += " " + p.config.context_parallel;  // e.g. "data+context ring"
  }
  return p;
}

ScreenCandidate screen_candidate(const Space& space, const Knobs& k) {
  const MeshChoice& mesh = space.meshes[k.mesh];
  ScreenCandidate s = mesh.shape;
  s.layout_label = mesh.layouts[k.layout].first;
  if (s.ctx > 1) s.context_parallel = space.strategies[k.strategy];
  s.schedule = space.schedules[k.schedule];
  s.recompute = space.recomputes[k.recompute];
  s.chunks = k.chunks, s.zero = k.zero, s.microbatches = k.microbatches;
  return s;
}

// Checks that need no compile; false prunes.
bool shape_fits(const TrainConfig& base, const Space& space, const Knobs& k) {
  const MeshChoice& mesh = space.meshes[k.mesh];
  const int pipe = mesh.shape.pipe, data = mesh.shape.data, model = mesh.shape.model;
  if (base.batch % k.microbatches != 0 || (base.batch / k.microbatches) % data != 0) return false;
  if (is_builtin_transformer(base.model)) {
    const int64_t heads =
        base.model == "llama" && base.n_kv_head > 0 ? base.n_kv_head : base.n_head;
    if (heads % model != 0 || base.vocab % model != 0) return false;
    if (mesh.layouts[k.layout].second.find("seq=model") != std::string::npos &&
        base.context % model != 0)
      return false;
    if (pipe * k.chunks > base.n_layer) return false;
    if (mesh.shape.ctx > 1 &&
        !context_axis_fits(base, model, mesh.shape.ctx, space.strategies[k.strategy],
                           mesh.ctx_after_model))
      return false;
  }
  const std::string& schedule = space.schedules[k.schedule];
  if (schedule == "interleaved" && (pipe < 2 || k.microbatches % pipe != 0)) return false;
  if (k.zero == 3 && (pipe > 1 || k.microbatches > 1)) return false;
  if (k.zero > 0 && data == 1 && (pipe > 1 || k.microbatches > 1)) return false;  // ZeRO over ctx
  return true;
}

// Candidates whose peak memory orders by their ZeRO stage (0 to 2) and
// recompute policy (none, selective, blocks): the same mesh, layout,
// schedule, chunks and micro-batches. ZeRO 3 (weights gathered on use) is
// a group of its own.
std::array<int, 7> memory_group(const Knobs& k) {
  return {k.mesh, k.layout, k.strategy, k.schedule, k.chunks, k.microbatches, k.zero == 3 ? 1 : 0};
}

// The memory group across axis orders: a mesh's order moves collectives
// between links, not bytes, so the same axis sizes hold the same memory.
std::array<int, 10> memory_class(const Space& space, const Knobs& k) {
  const ScreenCandidate& m = space.meshes[k.mesh].shape;
  return {m.pipe,     m.data,     m.model,  m.ctx,          k.layout,
          k.strategy, k.schedule, k.chunks, k.microbatches, k.zero == 3 ? 1 : 0};
}

int recompute_rank(const std::string& policy) {
  return policy == "blocks" ? 2 : policy == "selective" ? 1 : 0;
}

// The memory-lean member of candidate i's group: the most recomputation,
// then the highest ZeRO stage that passes the shape checks. Its peak is
// taken to bound the group's from below (recomputation and ZeRO 1-2 only
// drop stored bytes), so the extension costs it first and, when it does not
// fit, skips the group and those of the other axis orders (memory_class). A group's members are
// adjacent in generation order (candidates()' loops: zero, then recompute, innermost).
int lean_sibling(const TrainConfig& base, const Space& space, int i) {
  const std::array<int, 7> group = memory_group(space.knobs[i]);
  auto leaner = [&](int a, int b) {  // whether a is leaner than b
    const Knobs &x = space.knobs[a], &y = space.knobs[b];
    const int rx = recompute_rank(space.recomputes[x.recompute]),
              ry = recompute_rank(space.recomputes[y.recompute]);
    return rx != ry ? rx > ry : x.zero > y.zero;
  };
  int lean = i;
  for (int step : {-1, 1})
    for (int j = i + step; j >= 0 && j < static_cast<int>(space.knobs.size()); j += step) {
      if (memory_group(space.knobs[j]) != group) break;
      if (shape_fits(base, space, space.knobs[j]) && leaner(j, lean)) lean = j;
    }
  return lean;
}

// Candidates in order of screening's estimate, estimated lazily.
//
// Given every candidate's lower bound (sorted ascending) and a function
// that estimates one, next() yields the candidate of the smallest estimate
// among those not yielded yet, estimating only as far as needed: a
// candidate is estimated once every smaller bound has been, and the best
// estimate so far is final once the next bound exceeds it (a bound is never
// above its estimate: Screener's invariant). Ties: the smaller candidate
// index first. Candidates whose estimate throws are skipped (counted).
class ScreenedOrder {
 public:
  using Estimate = std::function<std::optional<double>(int candidate)>;  // nullopt: skipped
  ScreenedOrder(std::vector<std::pair<double, int>> sorted_bounds, Estimate estimate)
      : bounds_(std::move(sorted_bounds)), estimate_(std::move(estimate)) {}

  // (estimate, candidate), or nullopt when every candidate was yielded.
  std::optional<std::pair<double, int>> next() {
    while (position_ < bounds_.size() &&
           (ready_.empty() || bounds_[position_].first <= ready_.top().first)) {
      const int candidate = bounds_[position_++].second;
      const std::optional<double> e = estimate_(candidate);
      if (!e) {
        ++skipped_;
        continue;
      }
      ++estimated_;
      ready_.push({*e, candidate});
    }
    if (ready_.empty()) return std::nullopt;
    const std::pair<double, int> top = ready_.top();
    ready_.pop();
    return top;
  }

  int estimated() const { return estimated_; }
  int skipped() const { return skipped_; }
  // Candidates never estimated (their bound exceeded every estimate yielded).
  int unestimated() const { return static_cast<int>(bounds_.size() - position_); }

 private:
  std::vector<std::pair<double, int>> bounds_;
  Estimate estimate_;
  size_t position_ = 0;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>, std::greater<>>
      ready_;
  int estimated_ = 0, skipped_ = 0;
};

// Every live candidate's screening bound, and the order of estimates over
// them; a candidate whose unit the model cannot take is pruned (counted),
// the first such error kept.
std::unique_ptr<ScreenedOrder> screened_order(const Space& space, const std::vector<int>& live,
                                              Screener& screener, int* pruned,
                                              std::string* first_error) {
  for (int i : live) screener.note(screen_candidate(space, space.knobs[i]));
  std::vector<std::pair<double, int>> bounds;  // (bound, candidate)
  bounds.reserve(live.size());
  for (int i : live) {
    try {
      bounds.push_back({screener.lower_bound(screen_candidate(space, space.knobs[i])), i});
    } catch (const Error& e) {  // a layout the model cannot take
      ++*pruned;
      if (first_error->empty()) *first_error = e.what();
    }
  }
  std::sort(bounds.begin(), bounds.end());
  return std::make_unique<ScreenedOrder>(
      std::move(bounds), [&space, &screener, first_error](int i) -> std::optional<double> {
        try {
          return screener.estimate(screen_candidate(space, space.knobs[i]));
        } catch (const Error& e) {
          if (first_error->empty()) *first_error = e.what();
          return std::nullopt;
        }
      });
}

// Per memory class (memory_class), the (ZeRO stage, recompute rank) of the
// plans found over the memory limit: a plan of the class with no more of
// either cannot fit either (lean_sibling's premise).
class OverLimit {
 public:
  explicit OverLimit(const Space& space) : space_(space) {}
  void note(int i) { seen_[memory_class(space_, space_.knobs[i])].push_back(levels(i)); }
  bool dominated(int i) const {
    const auto it = seen_.find(memory_class(space_, space_.knobs[i]));
    if (it == seen_.end()) return false;
    const auto [zero, rank] = levels(i);
    for (const auto& [z, r] : it->second)
      if (z >= zero && r >= rank) return true;
    return false;
  }

 private:
  // ZeRO 1 and 2 hold the same bytes (docs/memory.md): one level.
  std::pair<int, int> levels(int i) const {
    const Knobs& k = space_.knobs[i];
    return {std::min(k.zero, 1), recompute_rank(space_.recomputes[k.recompute])};
  }
  const Space& space_;
  std::map<std::array<int, 10>, std::vector<std::pair<int, int>>> seen_;
};

// A --set override as a command-line argument: `--set KEY=VALUE`, single-
// quoted unless it is plain; empty for a key plan_flags writes itself.
std::string carried_override(const std::string& kv) {
  // `stages` is not among them: the search keeps the user's stage split.
  static const std::set<std::string> chosen = {"mesh",      "layout",  "microbatches",
                                               "schedule",  "chunks",  "zero",
                                               "recompute", "threads", "context_parallel"};
  if (chosen.count(kv.substr(0, kv.find('=')))) return "";
  const bool plain = std::all_of(kv.begin(), kv.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("_.=,:/+-", ch);
  });
  if (plain) return " --set " + kv;
  std::string quoted = "'";
  for (char ch : kv) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return " --set " + quoted + "'";
}

// The plan's throughput and the command that runs it.
void finish_plan(const PlanRequest& q, const HardwareModel& hw, double model_flops,
                 double items_per_row, Plan* plan) {
  const double step = plan->prediction.step_s;
  plan->tokens_per_s = static_cast<double>(q.base.batch) * items_per_row / step;
  plan->tflops_per_device = model_flops / step / q.ranks / 1e12;
  plan->fraction_of_peak =
      plan->tflops_per_device * 1e12 / hw.peak_flops(q.cost.precision, q.cost.threads);
  plan->command = (q.ranks > 1 ? str_cat("mpirun -n ", q.ranks, " ") : std::string()) +
                  "tessel train --config " + q.config_path;
  for (const std::string& kv : q.overrides) plan->command += carried_override(kv);
  plan->command += plan_flags(plan->config);
  if (hw.runs_on_cpu_threads()) plan->command += str_cat(" --threads ", q.cost.threads);
}

}  // namespace

std::string plan_flags(const TrainConfig& c) {
  std::string flags;
  if (!c.mesh.empty()) flags += " --mesh " + c.mesh;
  if (!c.layout.empty()) flags += " --layout " + c.layout;
  if (c.mesh.find("ctx=") != std::string::npos && !c.context_parallel.empty())
    flags += " --set context_parallel=" + c.context_parallel;
  const bool pipelined = c.mesh.find("pipe=") != std::string::npos || c.microbatches > 1;
  if (pipelined) {
    flags += str_cat(" --microbatches ", c.microbatches);
    if (c.mesh.find("pipe=") != std::string::npos) flags += " --schedule " + c.schedule;
    if (c.schedule == "interleaved") flags += str_cat(" --chunks ", c.chunks);
  }
  if (c.zero > 0) flags += str_cat(" --zero ", c.zero);
  if (c.recompute != "none") flags += " --recompute " + c.recompute;
  return flags;
}

bool same_step_as_printed(const StepPrediction& a, const StepPrediction& b) {
  // Steps in units of the printed 0.01 ms.
  return std::llround(a.step_s * 1e5) == std::llround(b.step_s * 1e5);
}

bool ranks_before(const StepPrediction& a, int a_generation, const StepPrediction& b,
                  int b_generation) {
  if (!same_step_as_printed(a, b)) return a.step_s < b.step_s;
  if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  return a_generation < b_generation;
}

namespace {

// Refuses a request no search can answer, before any work.
void check_request(const PlanRequest& q, const HardwareModel& hw) {
  TS_CHECK(q.ranks >= 1, "plan: --ranks must be at least 1, got ", q.ranks);
  if (q.ranks > hw.total_devices() && !q.oversubscribe)
    TS_THROW("plan: ", q.ranks, " ranks, but ", hw.name(), " has ", hw.total_devices(), " devices");
  TS_CHECK(q.exact_top >= 1, "plan: exact_top must be at least 1, got ", q.exact_top);
  q.base.validate(/*with_data=*/false);
  hw.peak_flops(q.cost.precision, q.cost.threads);  // a precision the hardware model lacks: say so
}

// Model FLOPs of one step (no recomputation), for TFLOP/s per device.
double model_step_flops(const TrainConfig& base) {
  TrainConfig none = base;
  none.recompute = "none";
  TrainingGraph t = build_training_graph(none, none.batch);
  std::vector<bool> all(t.graph.size(), true);
  return t.graph.flops(all);
}

// The per-rank memory a plan must fit: --memory-limit, or the device's
// memory when that is smaller and checked (0: no limit).
int64_t memory_limit(const PlanRequest& q, int64_t device_memory) {
  int64_t limit = q.memory_limit;
  if (q.check_device_memory && device_memory > 0 && (limit == 0 || device_memory < limit))
    limit = device_memory;
  return limit;
}

// Fastest first; equal steps as printed: the smaller peak, then the order
// of generation (ranks_before). `index_of` is each plan's candidate index.
void sort_fastest_first(std::vector<Plan>* plans, const std::vector<int>& index_of) {
  std::vector<int> rank(plans->size());
  for (size_t i = 0; i < rank.size(); ++i) rank[i] = static_cast<int>(i);
  std::sort(rank.begin(), rank.end(), [&](int x, int y) {
    return ranks_before((*plans)[x].prediction, index_of[x], (*plans)[y].prediction, index_of[y]);
  });
  std::vector<Plan> sorted;
  for (int i : rank) sorted.push_back(std::move((*plans)[i]));
  *plans = std::move(sorted);
}

// The candidates whose shapes fit the model (shape_fits), counted in
// `result` as considered or pruned.
std::vector<int> live_candidates(const TrainConfig& base, const Space& space, PlanResult* result) {
  std::vector<int> live;
  for (int i = 0; i < static_cast<int>(space.knobs.size()); ++i) {
    ++result->considered;
    if (shape_fits(base, space, space.knobs[i]))
      live.push_back(i);
    else
      ++result->pruned;
  }
  return live;
}

// The k-th fastest step of `plans` (infinite while there are fewer).
double kth_fastest_step(const std::vector<Plan>& plans, int k) {
  if (static_cast<int>(plans.size()) < k) return std::numeric_limits<double>::infinity();
  std::vector<double> steps;
  for (const Plan& p : plans) steps.push_back(p.prediction.step_s);
  std::nth_element(steps.begin(), steps.begin() + (k - 1), steps.end());
  return steps[k - 1];
}

void count_screening(const ScreenedOrder& order, const Screener& screener, PlanResult* result) {
  result->screened = order.estimated();
  result->pruned += order.skipped();
  result->bounded = order.unestimated();
  result->units = screener.units_compiled();
  result->simulated = screener.schedules_simulated();
}

// No plan: none compiled (naming the first error), or none fit (the
// smallest peak and the knobs that would lower it, no_fit.h).
[[noreturn]] void throw_nothing_fits(const PlanRequest& q, const PlanResult& result, NoFit closest,
                                     const std::string& first_error, bool screened, int64_t limit,
                                     int64_t device_memory) {
  closest.considered = result.considered, closest.exact = result.exact, closest.limit = limit;
  closest.screened = screened;
  closest.limit_is_device = q.check_device_memory && limit == device_memory;
  if (closest.smallest_peak < 0)
    TS_THROW("plan: none of the ", result.considered, " configurations of ", q.ranks,
             " ranks suits this model (", result.pruned, " pruned by divisibility or layout)",
             first_error.empty() ? std::string() : "; first error: " + first_error);
  TS_THROW(no_fit_message(q, closest));
}

// Whether a plan's host buffers times the ranks on a node exceed a node's
// host memory (where the hardware states it and the request checks
// memory); such a plan is counted in `result` (pruned, host_bounded).
bool over_host_memory(const PlanRequest& q, const HardwareModel& hw, bool one_node,
                      const StepPrediction& p, PlanResult* result) {
  const int64_t host = q.check_device_memory ? hw.host_memory_bytes() : 0;
  const int64_t need = p.host_bytes * (one_node ? q.ranks : hw.devices_per_node());
  if (host <= 0 || need <= host) return false;
  ++result->pruned, ++result->host_bounded;
  if (result->least_host_need == 0 || need < result->least_host_need)
    result->least_host_need = need;
  return true;
}

// One search at the request's offload. When no plan fits, it returns no
// plans and sets `nothing_fits` to throw the error naming what came closest.
// Phase 1, screening (screen.h): every live candidate's lower bound, then
// estimates as the exact phase asks for them, in order of estimate
// (ScreenedOrder). Phase 2 costs exactly, in that order, until `exact_top`
// plans fit and the next estimate cannot beat the `exact_top`-th (within
// screening's margin), at most 4 x `exact_top`. When fewer fit the memory
// limit, the search goes on (the extension): lean members (lean_sibling) of
// the groups over it first, then memory-lean plans first, skipping
// candidates whose model states alone exceed the limit, up to 12 x
// `exact_top` more exact costs.
PlanResult search_at_offload(const PlanRequest& q, const HardwareModel& hw,
                             std::function<void()>* nothing_fits) {
  const auto start = std::chrono::steady_clock::now();
  check_request(q, hw);
  PlanResult result;
  result.hardware = hw.name();
  const double model_flops = model_step_flops(q.base);
  const int64_t device_memory = hw.device_memory_bytes();
  const int64_t limit = memory_limit(q, device_memory);
  // Oversubscribed ranks share this host: the axis order changes nothing.
  const bool one_node = hw.devices_per_node() >= q.ranks || q.oversubscribe;
  const double items_per_row =  // tokens per row, or one image
      model_data_kind(q.base) == DataKind::kText ? static_cast<double>(q.base.context) : 1;

  NoFit closest;  // the smallest peak costed exactly, for the message when nothing fits
  closest.smallest_peak = -1;
  closest.offload_helps = !hw.host_buffers_on_device();
  std::string first_error;

  const Space space = candidates(q, one_node, hw.devices_per_node());
  const std::vector<int> live = live_candidates(q.base, space, &result);

  const bool screen =
      !q.exhaustive && static_cast<int>(live.size()) > q.exact_top &&
      Screener::applies(q.base, q.layout.has_value(), q.recompute ? &*q.recompute : nullptr, hw);
  std::unique_ptr<Screener> screener;
  std::unique_ptr<ScreenedOrder> order;
  if (screen) {
    screener = std::make_unique<Screener>(q.base, hw, q.cost);
    order = screened_order(space, live, *screener, &result.pruned, &first_error);
  }
  size_t unscreened = 0;  // without screening: the next of `live`
  auto next = [&]() -> std::optional<std::pair<double, int>> {
    if (screen) return order->next();
    if (unscreened == live.size()) return std::nullopt;
    return std::make_pair(0.0, live[unscreened++]);
  };

  std::vector<int> index_of_plan;  // candidate index of each plan, for ties
  auto kth_exact = [&] { return kth_fastest_step(result.plans, q.exact_top); };
  ExactCoster exact(hw, q.cost, q.share_compiles);
  std::set<int> costed;         // candidates costed exactly
  OverLimit over_limit(space);  // plans found over the limit, by memory class
  // Costs candidate `i` exactly: whether it fits, does not, or fails to compile.
  enum class Costed { kFits, kOver, kFailed };
  auto cost = [&](int i) {
    costed.insert(i);
    Plan plan = materialize(q, space, space.knobs[i]);
    ++result.exact;
    try {
      plan.prediction = exact.cost(plan.config);
    } catch (const Error& e) {  // a layout or schedule this model cannot take
      ++result.pruned;
      if (first_error.empty()) first_error = e.what();
      return Costed::kFailed;
    }
    const int64_t peak = plan.prediction.peak_bytes;
    if (closest.smallest_peak < 0 || peak < closest.smallest_peak)
      closest.smallest_peak = peak, closest.smallest = plan.config;
    if (limit > 0 && peak > limit) {
      ++result.pruned;
      over_limit.note(i);
      return Costed::kOver;
    }
    if (over_host_memory(q, hw, one_node, plan.prediction, &result)) return Costed::kOver;
    finish_plan(q, hw, model_flops, items_per_row, &plan);
    result.plans.push_back(std::move(plan));
    index_of_plan.push_back(i);
    return Costed::kFits;
  };
  const int keep = 4 * q.exact_top;
  int extension_start = -1;                // result.exact when the extension began
  std::vector<int> over_before_extension;  // their groups' lean members open the extension
  for (int popped = 0;; ++popped) {
    const bool extending = screen && popped >= keep;
    if (extending && extension_start < 0) {
      if (limit == 0 || static_cast<int>(result.plans.size()) >= q.exact_top) break;
      extension_start = result.exact;
      for (int j : over_before_extension) {
        const int lean = lean_sibling(q.base, space, j);
        if (!costed.count(lean) && !over_limit.dominated(lean)) cost(lean);
      }
    }
    if (extending && (result.exact - extension_start >= 3 * keep || popped >= 100 * keep)) break;
    const std::optional<std::pair<double, int>> n = next();
    if (!n) break;
    // Stop once `exact_top` plans fit and the next estimate, less screening's
    // margin of error, cannot beat the `exact_top`-th.
    if (screen && n->first > kth_exact() * (1 + q.screen_margin)) break;
    const int i = n->second;
    if (!extending) {
      if (cost(i) == Costed::kOver) over_before_extension.push_back(i);
      continue;
    }
    if (costed.count(i)) continue;
    if (over_limit.dominated(i) ||
        screener->state_bytes_bound(screen_candidate(space, space.knobs[i])) > limit) {
      ++result.memory_bounded;
      continue;
    }
    const int lean = lean_sibling(q.base, space, i);
    if (lean != i && !costed.count(lean) && cost(lean) == Costed::kOver) {
      ++result.memory_bounded;
      continue;
    }
    cost(i);
  }
  if (screen) count_screening(*order, *screener, &result);
  sort_fastest_first(&result.plans, index_of_plan);
  result.search_s = seconds_since(start);
  if (result.plans.empty())
    *nothing_fits = [=] {
      throw_nothing_fits(q, result, closest, first_error, screen, limit, device_memory);
    };
  return result;
}

// The offloads searched beside the plans without: none where host memory
// is the device's (this machine) or the request fixes offload. Where
// nothing fits without offload, every one. Where it competes with
// recomputation, the optimizer's by precision: in bf16 with the weights
// (less device memory, and fewer bytes over the link than the optimizer
// alone: the gradient out and each weight read once to round it, against
// gradient and weight out and back), in f32 without them (the einsums would
// read each weight over the link at every use).
std::vector<std::string> offload_choices(const PlanRequest& q, const HardwareModel& hw,
                                         bool nothing_fits) {
  if (q.offload_fixed || q.base.offload != "none" || hw.host_buffers_on_device()) return {};
  std::vector<std::string> out = {"activations"};
  if (q.base.optimizer != "adamw") return out;
  const bool bf16 = q.base.precision == "bf16";
  if (nothing_fits || !bf16) out.insert(out.end(), {"optimizer", "optimizer,activations"});
  if (nothing_fits || bf16)
    out.insert(out.end(), {"optimizer,weights", "optimizer,weights,activations"});
  return out;
}

// Where host memory ruled plans out: how many, and the least a node needed.
std::string host_memory_note(const PlanResult& r, const HardwareModel& hw) {
  if (r.host_bounded == 0) return "";
  return str_cat("\n", r.host_bounded,
                 " plans fit the device but not a node's host memory (their host buffers, "
                 "pinned offload included, times the ranks on a node): the least needs ",
                 format_size(r.least_host_need), " against ", format_size(hw.host_memory_bytes()),
                 " (host_memory_gib in the cluster file).");
}

}  // namespace

PlanResult search_plans(const PlanRequest& q, const HardwareModel& hw) {
  std::function<void()> nothing_fits;
  PlanResult result = search_at_offload(q, hw, &nothing_fits);
  std::vector<std::string> choices = offload_choices(q, hw, result.plans.empty());
  // Offload competes with recomputation for memory: it is weighed where no
  // plan fits or the fastest recomputes.
  if (!result.plans.empty() && result.plans.front().config.recompute == "none") choices.clear();
  // No plan, with offload searched (`offload_suffix`) or not.
  auto fail = [&](const std::string& offload_suffix) {
    try {
      nothing_fits();
    } catch (const Error& e) {
      TS_THROW(e.what(), offload_suffix, host_memory_note(result, hw));
    }
  };
  if (result.plans.empty() && choices.empty()) fail("");
  if (choices.empty()) return result;
  for (const std::string& offload : choices) {
    PlanRequest o = q;
    o.base.offload = offload;
    o.overrides.push_back("offload=" + offload);
    std::function<void()> none;
    PlanResult r = search_at_offload(o, hw, &none);
    result.considered += r.considered, result.pruned += r.pruned, result.screened += r.screened;
    result.bounded += r.bounded, result.exact += r.exact, result.units += r.units;
    result.memory_bounded += r.memory_bounded, result.simulated += r.simulated;
    if (r.host_bounded > 0 &&
        (result.host_bounded == 0 || r.least_host_need < result.least_host_need))
      result.least_host_need = r.least_host_need;
    result.host_bounded += r.host_bounded;
    result.search_s += r.search_s;
    for (Plan& p : r.plans) result.plans.push_back(std::move(p));
  }
  if (result.plans.empty())
    fail(str_cat(
        " (offload was searched too: activations",
        choices.size() > 1 ? ", optimizer, optimizer and weights, and each with activations" : "",
        ")"));
  std::vector<int> order(result.plans.size());  // ties: no offload, then the earlier offload
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  sort_fastest_first(&result.plans, order);
  return result;
}

}  // namespace tessel::plan
