#include "tessel/plan/search.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "tessel/base/error.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/model_registry.h"
#include "tessel/plan/screen.h"
#include "tessel/schedule/schedule.h"

namespace tessel::plan {
namespace {

struct Candidate {
  TrainConfig config;
  std::string layout_label;
};

// (pipe, data, model) with pipe * data * model = n.
std::vector<std::array<int, 3>> factorizations(int n) {
  std::vector<std::array<int, 3>> out;
  for (int p = 1; p <= n; ++p)
    if (n % p == 0)
      for (int d = 1; d <= n / p; ++d)
        if ((n / p) % d == 0) out.push_back({p, d, n / p / d});
  return out;
}

// Every order of the axes larger than 1 (only the canonical pipe, data,
// model order when every rank shares one node: the order changes nothing).
std::vector<std::string> mesh_texts(const std::array<int, 3>& sizes, bool one_node) {
  std::vector<MeshAxis> axes;
  const char* names[] = {"pipe", "data", "model"};
  for (int i = 0; i < 3; ++i)
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

// `heads`: the model's attention-head dim ("kv_heads" for Llama).
std::vector<std::pair<std::string, std::string>> layouts(const Mesh& mesh,
                                                         const std::string& heads) {
  const bool data = mesh.axis_index("data") >= 0, model = mesh.axis_index("model") >= 0;
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
};

// A candidate as indices into the search space (a TrainConfig is built
// only for those costed exactly: at scale there are a million candidates).
struct Knobs {
  int mesh, layout, schedule, recompute, chunks, microbatches, zero;
};

struct Space {
  std::vector<MeshChoice> meshes;
  std::vector<std::string> schedules, recomputes;
  std::vector<Knobs> knobs;  // in generation order
};

int index_of(std::vector<std::string>& names, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return static_cast<int>(i);
  names.push_back(name);
  return static_cast<int>(names.size()) - 1;
}

Space candidates(const PlanRequest& q, bool one_node, int devices_per_node) {
  std::vector<std::string> meshes;
  if (q.mesh) {
    meshes.push_back(*q.mesh);
  } else {
    for (const auto& f : factorizations(q.ranks))
      for (const std::string& m : mesh_texts(f, one_node)) meshes.push_back(m);
  }
  Space out;
  for (const std::string& mesh_text : meshes) {
    const Mesh mesh = Mesh::parse(mesh_text);
    if (mesh.rank_count() != q.ranks)
      TS_THROW("plan: --mesh ", mesh_text, " has ", mesh.rank_count(), " ranks, not ", q.ranks);
    TrainConfig shape;
    shape.mesh = mesh_text;
    MeshChoice choice{mesh_text, ScreenCandidate::of(shape, "", devices_per_node), {}};
    choice.layouts = q.layout
                         ? std::vector<std::pair<std::string, std::string>>{{*q.layout, *q.layout}}
                         : layouts(mesh, q.base.model == "llama" ? "kv_heads" : "heads");
    const int pipe = choice.shape.pipe;
    const bool data = mesh.axis_index("data") >= 0;
    std::vector<std::string> schedules = {"1f1b"};
    if (q.schedule)
      schedules = {*q.schedule};
    else if (pipe > 1)
      schedules = {"gpipe", "1f1b", "interleaved", "zb-h1"};
    std::vector<int> micro;
    if (q.microbatches) {
      micro = {*q.microbatches};
    } else if (pipe == 1) {
      micro = {1};
    } else {
      for (int m = 1; m <= q.base.batch && m <= 8 * pipe; ++m)
        if (q.base.batch % m == 0) micro.push_back(m);
    }
    std::vector<int> zeros = {0};
    if (q.zero)
      zeros = {*q.zero};
    else if (data)
      zeros = {0, 1, 2, 3};
    const std::vector<std::string> recomputes =
        q.recompute ? std::vector<std::string>{*q.recompute}
                    : std::vector<std::string>{"none", "selective", "blocks"};
    const int mesh_index = static_cast<int>(out.meshes.size());
    for (int layout = 0; layout < static_cast<int>(choice.layouts.size()); ++layout)
      for (const std::string& schedule : schedules)
        for (int m : micro)
          for (int zero : zeros)
            for (const std::string& recompute : recomputes) {
              const int chunks = q.chunks ? *q.chunks : (schedule == "interleaved" ? 2 : 1);
              out.knobs.push_back({mesh_index, layout, index_of(out.schedules, schedule),
                                   index_of(out.recomputes, recompute), chunks, m, zero});
            }
    out.meshes.push_back(std::move(choice));
  }
  return out;
}

Candidate materialize(const PlanRequest& q, const Space& space, const Knobs& k) {
  const MeshChoice& mesh = space.meshes[k.mesh];
  Candidate c{q.base, mesh.layouts[k.layout].first};
  c.config.mesh = mesh.text;
  c.config.layout = mesh.layouts[k.layout].second;
  c.config.schedule = space.schedules[k.schedule];
  c.config.chunks = k.chunks;
  c.config.microbatches = k.microbatches;
  c.config.zero = k.zero;
  c.config.recompute = space.recomputes[k.recompute];
  return c;
}

ScreenCandidate screen_candidate(const Space& space, const Knobs& k) {
  const MeshChoice& mesh = space.meshes[k.mesh];
  ScreenCandidate s = mesh.shape;
  s.layout_label = mesh.layouts[k.layout].first;
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
  }
  const std::string& schedule = space.schedules[k.schedule];
  if (schedule == "interleaved" && (pipe < 2 || k.microbatches % pipe != 0)) return false;
  if (k.zero == 3 && (pipe > 1 || k.microbatches > 1)) return false;
  return true;
}

// A synchronous pipeline whose stages any of gpipe, 1f1b and zb-h1 share.
bool shares_stages(const TrainConfig& c) {
  return c.mesh.find("pipe=") != std::string::npos && c.chunks == 1 &&
         (c.schedule == "gpipe" || c.schedule == "1f1b" || c.schedule == "zb-h1");
}

std::string knobs(const TrainConfig& c) {
  return str_cat("mesh ", c.mesh.empty() ? "(one rank)" : c.mesh, ", layout ",
                 c.layout.empty() ? "(defaults)" : c.layout, ", schedule ", c.schedule, ", chunks ",
                 c.chunks, ", microbatches ", c.microbatches, ", zero ", c.zero, ", recompute ",
                 c.recompute);
}

}  // namespace

namespace {

// A --set override as a command-line argument: `--set KEY=VALUE`, single-
// quoted unless it is plain; empty for a key plan_flags writes itself.
std::string carried_override(const std::string& kv) {
  // `stages` is not among them: the search keeps the user's stage split.
  static const std::set<std::string> chosen = {"mesh",   "layout", "microbatches", "schedule",
                                               "chunks", "zero",   "recompute",    "threads"};
  if (chosen.count(kv.substr(0, kv.find('=')))) return "";
  const bool plain = std::all_of(kv.begin(), kv.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::strchr("_.=,:/+-", ch);
  });
  if (plain) return " --set " + kv;
  std::string quoted = "'";
  for (char ch : kv) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return " --set " + quoted + "'";
}

}  // namespace

std::string plan_flags(const TrainConfig& c) {
  std::string flags;
  if (!c.mesh.empty()) flags += " --mesh " + c.mesh;
  if (!c.layout.empty()) flags += " --layout " + c.layout;
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

PlanResult search_plans(const PlanRequest& q, const HardwareModel& hw) {
  const auto start = std::chrono::steady_clock::now();
  TS_CHECK(q.ranks >= 1, "plan: --ranks must be at least 1, got ", q.ranks);
  if (q.ranks > hw.total_devices() && !q.oversubscribe)
    TS_THROW("plan: ", q.ranks, " ranks, but ", hw.name(), " has ", hw.total_devices(), " devices");
  TS_CHECK(q.exact_top >= 1, "plan: exact_top must be at least 1, got ", q.exact_top);
  q.base.validate(/*with_data=*/false);
  hw.peak_flops(q.cost.precision, q.cost.threads);  // a precision the hardware model lacks: say so
  PlanResult result;
  result.hardware = hw.name();
  // Model FLOPs of one step (no recomputation), for TFLOP/s per device.
  double model_flops = 0;
  {
    TrainConfig none = q.base;
    none.recompute = "none";
    TrainingGraph t = build_training_graph(none, none.batch);
    std::vector<bool> all(t.graph.size(), true);
    model_flops = t.graph.flops(all);
  }
  const int64_t device_memory = hw.device_memory_bytes();
  int64_t limit = q.memory_limit;
  if (q.check_device_memory && device_memory > 0 && (limit == 0 || device_memory < limit))
    limit = device_memory;
  // Oversubscribed ranks share this host: the axis order changes nothing.
  const bool one_node = hw.devices_per_node() >= q.ranks || q.oversubscribe;
  const double items_per_row = model_data_kind(q.base) == DataKind::kText
                                   ? static_cast<double>(q.base.context)
                                   : 1;  // tokens per row, or one image

  GraphCache graphs;  // training and stage graphs, evaluation arenas (keyed by recompute)
  // Compiles kept for the current mesh, by config: pipelines (as 1f1b,
  // ZeRO 0) and single programs under ZeRO 1 and 2 (as ZeRO 1), with their
  // stages' phase costs once predicted (the same under every schedule and
  // ZeRO stage).
  struct Kept {
    std::vector<CompiledRank> ranks;
    StagePhaseMemo phases;
  };
  std::map<std::string, Kept> pipelines;
  std::string pipelines_mesh;
  // Without shared compiles, every compile builds its graphs (the reference path).
  auto shared_graphs = [&]() -> GraphCache* { return q.share_compiles ? &graphs : nullptr; };
  int64_t closest = -1;
  std::string closest_knobs, first_error;

  // Candidates that pass the checks needing no compile.
  const Space space = candidates(q, one_node, hw.devices_per_node());
  std::vector<int> live;
  for (int i = 0; i < static_cast<int>(space.knobs.size()); ++i) {
    ++result.considered;
    if (shape_fits(q.base, space, space.knobs[i]))
      live.push_back(i);
    else
      ++result.pruned;
  }

  // Phase 1, screening (screen.h): every live candidate's lower bound; then,
  // in order of bound, estimates until the next bound exceeds the
  // 4 x `exact_top`-th best estimate (kept so that plans the exact phase
  // drops for memory have successors). Phase 2 costs exactly, in order of
  // estimate, until `exact_top` plans fit.
  std::vector<int> order = live;  // the candidates to cost exactly, in this order
  std::vector<double> estimates;  // screening: their estimates
  const bool screen =
      !q.exhaustive && static_cast<int>(live.size()) > q.exact_top &&
      Screener::applies(q.base, q.layout.has_value(), q.recompute ? &*q.recompute : nullptr, hw);
  if (screen) {
    Screener screener(q.base, hw, q.cost);
    for (int i : live) screener.note(screen_candidate(space, space.knobs[i]));
    std::vector<std::pair<double, int>> bounds;  // (bound, candidate)
    bounds.reserve(live.size());
    for (int i : live) {
      try {
        bounds.push_back({screener.lower_bound(screen_candidate(space, space.knobs[i])), i});
      } catch (const Error& e) {  // a layout the model cannot take
        ++result.pruned;
        if (first_error.empty()) first_error = e.what();
      }
    }
    std::sort(bounds.begin(), bounds.end());
    const size_t keep = 4 * static_cast<size_t>(q.exact_top);
    std::vector<std::pair<double, int>> best;  // (estimate, candidate), a max-heap of `keep`
    for (size_t b = 0; b < bounds.size(); ++b) {
      const int i = bounds[b].second;
      if (best.size() >= keep && bounds[b].first > best.front().first) {
        result.bounded += static_cast<int>(bounds.size() - b);  // every later bound is larger
        break;
      }
      double estimate = 0;
      try {
        estimate = screener.estimate(screen_candidate(space, space.knobs[i]));
      } catch (const Error& e) {
        ++result.pruned;
        if (first_error.empty()) first_error = e.what();
        continue;
      }
      ++result.screened;
      best.push_back({estimate, i});
      std::push_heap(best.begin(), best.end());
      if (best.size() > keep) {
        std::pop_heap(best.begin(), best.end());
        best.pop_back();
      }
    }
    std::sort(best.begin(), best.end());
    order.clear();
    for (const auto& [estimate, i] : best) order.push_back(i), estimates.push_back(estimate);
    result.units = screener.units_compiled();
    result.simulated = screener.schedules_simulated();
  }

  std::vector<int> index_of_plan;  // candidate index of each plan, for ties
  // The `exact_top`-th best exact step so far (infinite until there are that many).
  auto kth_exact = [&] {
    if (static_cast<int>(result.plans.size()) < q.exact_top)
      return std::numeric_limits<double>::infinity();
    std::vector<double> steps;
    for (const Plan& p : result.plans) steps.push_back(p.prediction.step_s);
    std::nth_element(steps.begin(), steps.begin() + (q.exact_top - 1), steps.end());
    return steps[q.exact_top - 1];
  };
  for (size_t n = 0; n < order.size(); ++n) {
    const int i = order[n];
    // Stop once `exact_top` plans fit and the next estimate, less screening's
    // margin of error, cannot beat the `exact_top`-th.
    if (screen && estimates[n] > kth_exact() * (1 + q.screen_margin)) break;
    Candidate cand = materialize(q, space, space.knobs[i]);
    ++result.exact;
    const Mesh mesh = Mesh::parse(cand.config.mesh);
    Plan plan;
    try {
      const std::vector<int> reps = representative_ranks(mesh, false);
      if (q.share_compiles && uses_pipeline(cand.config, mesh)) {
        // gpipe, 1f1b and zb-h1 compile to the same stages, and so do ZeRO
        // 0, 1 and 2 (PipelineModel::set_zero): compile once (as 1f1b, ZeRO 0).
        if (pipelines_mesh != cand.config.mesh)
          pipelines.clear(), pipelines_mesh = cand.config.mesh;
        const bool shared = shares_stages(cand.config);
        TrainConfig key = cand.config;
        if (shared) key.schedule = "1f1b";
        key.zero = 0;
        const std::string k = key.to_json().dump();
        auto it = pipelines.find(k);
        if (it == pipelines.end())
          it = pipelines.emplace(k, Kept{compile_ranks(key, reps, &graphs), {}}).first;
        Kept& kept = it->second;
        for (CompiledRank& c : kept.ranks) {
          c.pipeline->set_zero(cand.config.zero);
          c.config.zero = cand.config.zero;
        }
        if (shared) {
          const Schedule schedule =
              make_schedule(cand.config.schedule, kept.ranks.front().pipeline->schedule().ranks,
                            static_cast<int>(cand.config.microbatches));
          plan.prediction = predict_compiled(kept.ranks, hw, q.cost, &schedule, &kept.phases);
        } else {
          plan.prediction = predict_compiled(kept.ranks, hw, q.cost, nullptr, &kept.phases);
        }
      } else if (shares_stages(cand.config)) {
        // gpipe, 1f1b and zb-h1 compile to the same stages: compile once (as 1f1b).
        TrainConfig key = cand.config;
        key.schedule = "1f1b";
        const std::string k = key.to_json().dump();
        auto it = pipelines.find(k);
        if (it == pipelines.end())
          it = pipelines.emplace(k, Kept{compile_ranks(key, reps, shared_graphs()), {}}).first;
        const std::vector<CompiledRank>& ranks = it->second.ranks;
        const Schedule schedule =
            make_schedule(cand.config.schedule, ranks.front().pipeline->schedule().ranks,
                          static_cast<int>(cand.config.microbatches));
        plan.prediction = predict_compiled(ranks, hw, q.cost, &schedule);
      } else if (q.share_compiles && (cand.config.zero == 1 || cand.config.zero == 2)) {
        // ZeRO 1 and 2 lower a single program alike (zero_targets: both
        // reduce-scatter the gradients; compile/zero.h): compile once (as
        // ZeRO 1), re-pointed at the candidate's stage.
        if (pipelines_mesh != cand.config.mesh)
          pipelines.clear(), pipelines_mesh = cand.config.mesh;
        TrainConfig key = cand.config;
        key.zero = 1;
        const std::string k = key.to_json().dump();
        auto it = pipelines.find(k);
        if (it == pipelines.end())
          it = pipelines.emplace(k, Kept{compile_ranks(key, reps, &graphs), {}}).first;
        for (CompiledRank& c : it->second.ranks) c.config.zero = cand.config.zero;
        plan.prediction = predict_compiled(it->second.ranks, hw, q.cost, nullptr);
      } else {
        plan.prediction = predict_step(cand.config, reps, hw, q.cost, shared_graphs());
      }
    } catch (const Error& e) {  // a layout or schedule this model cannot take
      ++result.pruned;
      if (first_error.empty()) first_error = e.what();
      continue;
    }
    const int64_t peak = plan.prediction.peak_bytes;
    if (closest < 0 || peak < closest) closest = peak, closest_knobs = knobs(cand.config);
    if (limit > 0 && peak > limit) {
      ++result.pruned;
      continue;
    }
    plan.config = cand.config;
    plan.layout_label = cand.layout_label;
    const double step = plan.prediction.step_s;
    plan.tokens_per_s = static_cast<double>(q.base.batch) * items_per_row / step;
    plan.tflops_per_device = model_flops / step / q.ranks / 1e12;
    plan.fraction_of_peak =
        plan.tflops_per_device * 1e12 / hw.peak_flops(q.cost.precision, q.cost.threads);
    plan.command = (q.ranks > 1 ? str_cat("mpirun -n ", q.ranks, " ") : std::string()) +
                   "tessel train --config " + q.config_path;
    for (const std::string& kv : q.overrides) plan.command += carried_override(kv);
    plan.command += plan_flags(plan.config) + str_cat(" --threads ", q.cost.threads);
    result.plans.push_back(std::move(plan));
    index_of_plan.push_back(i);
  }
  // Fastest first; equal steps as printed: the smaller peak, then the order
  // of generation (ranks_before).
  std::vector<int> rank(result.plans.size());
  for (size_t i = 0; i < rank.size(); ++i) rank[i] = static_cast<int>(i);
  std::sort(rank.begin(), rank.end(), [&](int x, int y) {
    return ranks_before(result.plans[x].prediction, index_of_plan[x], result.plans[y].prediction,
                        index_of_plan[y]);
  });
  std::vector<Plan> sorted;
  for (int i : rank) sorted.push_back(std::move(result.plans[i]));
  result.plans = std::move(sorted);
  result.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result.plans.empty()) {
    if (closest < 0)
      TS_THROW("plan: none of the ", result.considered, " configurations of ", q.ranks,
               " ranks suits this model (", result.pruned, " pruned by divisibility or layout)",
               first_error.empty() ? std::string() : "; first error: " + first_error);
    TS_THROW("plan: none of the ", result.considered, " configurations of ", q.ranks,
             " ranks fits ", format_bytes(limit), " per rank; the smallest peak found is ",
             format_bytes(closest), " (", closest_knobs,
             "). Raise --memory-limit to at least that, use more ranks, or free a fixed knob");
  }
  return result;
}

}  // namespace tessel::plan
