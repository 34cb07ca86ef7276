// `tessel plan`: ranks every configuration of N ranks by predicted step
// time (plan/search/search.h) and prints the table, the commands that run the
// plans, optionally --explain (the best plan against the runner-up) or one
// JSON object (--json). Never loads data or allocates tensors.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "config_options.h"
#include "plan_published.h"
#include "tessel/base/error.h"
#include "tessel/compile/memory_report.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/plan/calibrate/calibrate.h"
#include "tessel/plan/calibrate/contention.h"
#include "tessel/plan/format_size.h"
#include "tessel/plan/profile/cluster_spec.h"
#include "tessel/plan/published_run.h"
#include "tessel/plan/search/search.h"

namespace tessel::cli {
namespace {

struct PlanOptions {
  ConfigOptions config;
  int ranks = 0;  // 0: the published block's gpus
  std::string cluster, profile;
  int top = 10;
  bool json = false, explain = false, ignore_device_memory = false, oversubscribe = false,
       exhaustive = false, skip_probe = false, compare_published = false, free = false;
};

double total(const std::map<std::string, double>& per_axis) {
  double t = 0;
  for (const auto& [axis, s] : per_axis) t += s;
  return t;
}

std::string comm_shares(const plan::StepPrediction& p) {
  std::string out;
  for (const auto& [axis, s] : p.exposed_comm_s)
    out +=
        str_cat(out.empty() ? "" : " ", axis, ":", static_cast<int>(100 * s / p.step_s + 0.5), "%");
  return out.empty() ? "-" : out;
}

}  // namespace

nlohmann::json plan_json(const plan::Plan& p) {
  const TrainConfig& c = p.config;
  nlohmann::json comm = nlohmann::json::object(), exposed = nlohmann::json::object();
  for (const auto& [axis, s] : p.prediction.comm_s) comm[axis] = s * 1e3;
  for (const auto& [axis, s] : p.prediction.exposed_comm_s) exposed[axis] = s * 1e3;
  return {{"mesh", c.mesh},
          {"layout", c.layout},
          {"layout_kind", p.layout_label},
          {"context_parallel", c.mesh.find("ctx=") != std::string::npos ? c.context_parallel : ""},
          {"schedule", c.schedule},
          {"chunks", c.chunks},
          {"microbatches", c.microbatches},
          {"zero", c.zero},
          {"recompute", c.recompute},
          {"offload", c.offload},
          {"precision", c.precision},
          {"step_ms", p.prediction.step_s * 1e3},
          {"compute_ms", p.prediction.compute_s * 1e3},
          {"optimizer_ms", p.prediction.optimizer_s * 1e3},
          {"bubble_ms", p.prediction.bubble_s * 1e3},
          {"comm_ms", comm},
          {"exposed_comm_ms", exposed},
          {"tokens_per_s", p.tokens_per_s},
          {"tflops_per_device", p.tflops_per_device},
          {"fraction_of_peak", p.fraction_of_peak},
          {"peak_bytes", p.prediction.peak_bytes},
          {"peak_rank", p.prediction.peak_rank},
          {"host_bytes", p.prediction.host_bytes},
          {"flags", plan::plan_flags(c)},
          {"command", p.command}};
}

nlohmann::json search_counts_json(const plan::PlanResult& r) {
  return {{"search_s", r.search_s},
          {"considered", r.considered},
          {"pruned", r.pruned},
          {"screened", r.screened},
          {"bounded", r.bounded},
          {"exact", r.exact},
          {"memory_bounded", r.memory_bounded},
          {"costed", r.plans.size()}};
}

namespace {

void print_breakdown(const char* title, const plan::Plan& p) {
  const plan::StepPrediction& s = p.prediction;
  std::printf(
      "%s: %s\n  step %.2f ms = compute %.2f + exposed communication %.2f + bubble %.2f "
      "+ optimizer %.2f",
      title, plan::plan_flags(p.config).c_str(), s.step_s * 1e3, s.compute_s * 1e3,
      total(s.exposed_comm_s) * 1e3, s.bubble_s * 1e3, s.optimizer_s * 1e3);
  std::printf("\n  communication per axis (exposed of total):");
  for (const auto& [axis, t] : s.comm_s)
    std::printf(" %s %.2f of %.2f ms", axis.c_str(), s.exposed_comm_s.at(axis) * 1e3, t * 1e3);
  if (s.comm_s.empty()) std::printf(" none");
  std::printf("\n  peak memory %s (rank %d); host memory at most %s a rank\n",
              plan::format_size(s.peak_bytes).c_str(), s.peak_rank,
              plan::format_size(s.host_bytes).c_str());
}

void explain(const plan::PlanResult& r) {
  print_breakdown("best", r.plans[0]);
  if (r.plans.size() < 2) return;
  print_breakdown("runner-up", r.plans[1]);
  const plan::StepPrediction &a = r.plans[0].prediction, &b = r.plans[1].prediction;
  const std::vector<std::pair<const char*, double>> deltas = {
      {"compute", b.compute_s - a.compute_s},
      {"exposed communication", total(b.exposed_comm_s) - total(a.exposed_comm_s)},
      {"pipeline bubble", b.bubble_s - a.bubble_s},
      {"optimizer", b.optimizer_s - a.optimizer_s}};
  const auto biggest = std::max_element(
      deltas.begin(), deltas.end(),
      [](const auto& x, const auto& y) { return std::abs(x.second) < std::abs(y.second); });
  const double gap_ms = (b.step_s - a.step_s) * 1e3;
  if (plan::same_step_as_printed(a, b)) {
    const std::string why =
        a.peak_bytes < b.peak_bytes
            ? str_cat("it needs less memory (peak ", plan::format_size(a.peak_bytes), " against ",
                      plan::format_size(b.peak_bytes), ")")
            : str_cat("they need the same memory too (peak ", plan::format_size(a.peak_bytes),
                      "), so the search's order of candidates decides");
    std::printf(
        "why: the best and the runner-up tie at %.2f ms per step (equal to the 0.01 ms "
        "printed); the best is listed first because %s\n",
        a.step_s * 1e3, why.c_str());
    return;
  }
  std::printf(
      "why: the best is %.3g ms (%.2g%%) faster; the largest difference is %s (%+.3g ms for "
      "the runner-up)\n",
      gap_ms, 100 * gap_ms / (b.step_s * 1e3), biggest->first, biggest->second * 1e3);
}

// What each column of the table means, after it.
void print_legend() {
  std::printf(
      "\ncolumns:\n"
      "  #            rank, fastest predicted step first (equal steps: smaller memory first)\n"
      "  mesh         how the ranks are arranged: pipe (pipeline stages) x data (data "
      "parallel) x model (tensor parallel) x ctx (context parallel)\n"
      "  layout       data: weights replicated; tensor: Megatron tensor parallel; "
      "tensor+sequence: with sequence parallelism; +context ring|all_to_all: seq split over "
      "ctx, attention by that strategy\n"
      "  schedule     pipeline schedule (gpipe, 1f1b, interleaved, zb-h1); - without a pipe "
      "axis\n"
      "  v            virtual pipeline stages (chunks) per rank: 2 or 4 for interleaved "
      "(--chunks)\n"
      "  m            micro-batches a step is split into (--microbatches)\n"
      "  zero         ZeRO stage: 0 none, 1 optimizer state, 2 + gradients, 3 + weights "
      "sharded over data\n"
      "  recompute    activations recomputed in the backward pass: none, selective, blocks\n"
      "  offload      (where a plan offloads) what lives in host memory: optimizer, weights, "
      "activations\n"
      "  step ms      predicted time of one training step\n"
      "  tokens/s     predicted training throughput, all ranks together\n"
      "  TFLOP/s      model FLOPs (recomputation not counted) per second per rank\n"
      "  peak         that rate as a share of one rank's measured FMA peak\n"
      "  memory       predicted peak device memory of the most loaded rank (on a cluster file: "
      "host buffers left out)\n"
      "  bubble       share of the step a pipeline stage idles\n"
      "  exposed comm share of the step spent in communication not hidden behind compute, "
      "per mesh axis\n");
}

// A profile of this machine against a quick probe of it now (contention.h).
void probe_profile(const plan::MachineProfile& profile) {
  const plan::MachineProfileData& d = profile.data();
  if (d.cpu_model != plan::cpu_model_name() || d.nproc != plan::core_count()) return;
  for (const plan::ThreadRate& r : d.fma_peak_gflops) {
    if (r.threads != 1) continue;
    const plan::ContentionSettings s = plan::contention_settings();
    const std::string warning =
        plan::probe_mismatch(plan::quick_probe_gflops(s), r.gflops, s.mismatch, profile.source());
    if (!warning.empty())
      std::fprintf(stderr, "plan: %s (or pass --skip-probe to skip this check)\n", warning.c_str());
  }
}

// The hardware to plan for: --cluster, else --profile (or this machine's).
std::unique_ptr<plan::HardwareModel> load_hardware(const PlanOptions& opt) {
  if (!opt.cluster.empty() && !opt.profile.empty())
    TS_THROW("plan: give --cluster or --profile, not both");
  std::unique_ptr<plan::HardwareModel> hw;
  if (!opt.cluster.empty()) {
    hw = std::make_unique<plan::ClusterSpec>(plan::ClusterSpec::load(opt.cluster));
    // Another machine's plan: bf16 einsums sized as oneDNN's matmul takes
    // them, not as this CPU's route (kernels/einsum_bf16.h).
    kernels::set_plan_bf16_route(kernels::Bf16Route::kOneDnn);
  } else {
    bool calibrated = false;
    hw = plan::load_or_calibrate(opt.profile, &calibrated,
                                 "To skip it, give --profile FILE (a profile `tessel calibrate "
                                 "--out FILE` wrote) or --cluster FILE (examples/clusters/)");
    const auto* profile = dynamic_cast<const plan::MachineProfile*>(hw.get());
    if (profile && !calibrated && !opt.skip_probe) probe_profile(*profile);
    if (profile && !profile->has_co_run() && opt.ranks > 1)
      std::fprintf(stderr,
                   "plan: %s has no 'co_run' figures (a profile from before they were "
                   "measured): ranks are costed as if they never slowed each other down "
                   "(factor 1); run `tessel calibrate` again to measure them\n",
                   profile->source().c_str());
    if (profile && profile->data().attention_rates.empty())
      std::fprintf(stderr,
                   "plan: %s has no 'attention_rates' (a profile from before they were "
                   "measured): fused attention is priced by its bytes at the rate measured at "
                   "context 128, far too fast at long contexts; run `tessel calibrate` again to "
                   "measure it\n",
                   profile->source().c_str());
  }
  if (opt.ranks > hw->total_devices() && !opt.oversubscribe) {
    if (!opt.cluster.empty())
      TS_THROW("plan: ", opt.ranks, " ranks, but the cluster ", opt.cluster, " has ",
               hw->total_devices(), " devices: give --ranks ", hw->total_devices(),
               " or fewer, or a larger cluster file with --cluster");
    TS_THROW("plan: ", opt.ranks, " ranks, but ", hw->name(), " has ", hw->total_devices(),
             " devices (cores). To plan ", opt.ranks,
             " ranks sharing them, pass --oversubscribe (and run the plan with `mpirun "
             "--oversubscribe`; ranks sharing a core are costed at their share of it); to plan "
             "within this machine, give --ranks ",
             hw->total_devices(),
             " or fewer; to plan for other machines, give --cluster FILE (examples/clusters/)");
  }
  return hw;
}

int run_plan(PlanOptions opt) {
  // A published run (plan/published_run.h): the model from the file's
  // keys; the GPU count, cluster and knobs from its block unless the
  // command line gives them (--free: only the GPU count and the cluster).
  opt.config.allow_published = true;
  const plan::ConfigFile file = plan::read_config_file(opt.config.path);
  const TrainConfig base = opt.config.load(/*with_data=*/false);
  std::optional<plan::PublishedRun> published;
  if (file.published)
    published = plan::parse_published(*file.published, base, opt.config.path);
  else if (opt.compare_published || opt.free)
    TS_THROW("plan: ", opt.compare_published ? "--compare-published" : "--free",
             " needs a config with a 'published' block (examples/published/); ", opt.config.path,
             " has none");
  if (published && opt.ranks <= 0) opt.ranks = published->gpus;
  if (published && opt.cluster.empty() && opt.profile.empty()) opt.cluster = published->cluster;
  if (opt.ranks <= 0)
    TS_THROW(
        "plan: give --ranks N, the number of ranks to plan for (a config with a "
        "'published' block gives its GPU count)");
  const std::unique_ptr<plan::HardwareModel> hw = load_hardware(opt);
  if (opt.compare_published)
    return compare_published(
        {opt.config, base, *published, opt.ranks, opt.free, opt.json, opt.ignore_device_memory},
        *hw);
  const ConfigOptions knobs =
      published && !opt.free ? with_published_knobs(opt.config, *published, opt.ranks, base.batch)
                             : opt.config;
  if (published && !opt.json)
    std::printf("published run: %s (%s); searched: %s\n", published->run.c_str(),
                opt.free ? "--free: only its GPU count and cluster taken"
                         : "its stated knobs taken where the command line gives none",
                searched_knobs(knobs).empty() ? "nothing" : searched_knobs(knobs).c_str());
  std::fflush(stdout);
  plan::PlanRequest q = plan_request(knobs, base, opt.ranks);
  if (published) q.cost.overlap_data_parallel = published->data_parallel_overlap;
  q.check_device_memory = !opt.ignore_device_memory;
  q.oversubscribe = opt.oversubscribe;
  q.exact_top = std::max(q.exact_top, opt.top);  // every plan shown is costed exactly
  q.exhaustive = opt.exhaustive;
  plan::PlanResult r;
  try {
    r = plan::search_plans(q, *hw);
  } catch (const Error& e) {
    if (!published || opt.free) throw;
    TS_THROW(e.what(), "\nThe 'published' block fixed what the command line did not (searched: ",
             searched_knobs(knobs).empty() ? "nothing" : searched_knobs(knobs),
             "); --free searches every knob for its GPU count and cluster");
  }
  const size_t shown = std::min<size_t>(r.plans.size(), std::max(1, opt.top));
  if (opt.json) {
    nlohmann::json out = search_counts_json(r);
    out["hardware"] = r.hardware;
    out["ranks"] = opt.ranks;
    out["threads_per_rank"] = q.cost.threads;
    out["plans"] = nlohmann::json::array();
    for (size_t i = 0; i < shown; ++i) out["plans"].push_back(plan_json(r.plans[i]));
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  const std::string threads =
      hw->runs_on_cpu_threads() ? str_cat(" (", q.cost.threads, " threads per rank)") : "";
  std::printf(
      "plan for %d ranks on %s%s: %d configurations, %d pruned, %d screened, %d skipped by their "
      "bound, %d skipped for memory, %d costed exactly, %zu fit, in %.3f s\n\n",
      opt.ranks, r.hardware.c_str(), threads.c_str(), r.considered, r.pruned, r.screened, r.bounded,
      r.memory_bounded, r.exact, r.plans.size(), r.search_s);
  // An offload column where a shown plan offloads (plan::search_plans: only where nothing fits
  // without).
  const bool offloading = std::any_of(r.plans.begin(), r.plans.begin() + shown,
                                      [](const auto& p) { return p.config.offload != "none"; });
  auto recompute_cell = [&](const TrainConfig& k) {
    const std::string offload = k.offload == "none" ? "-" : k.offload;
    return offloading
               ? str_cat(k.recompute,
                         std::string(11 - std::min<size_t>(10, k.recompute.size()), ' '), offload)
               : k.recompute;
  };
  const int recompute_width = offloading ? 40 : 10;  // "optimizer,weights,activations"
  std::printf("%-3s %-24s %-16s %-11s %-2s %-3s %-4s %-*s %9s %10s %8s %6s %10s %7s %s\n", "#",
              "mesh", "layout", "schedule", "v", "m", "zero", recompute_width,
              offloading ? "recompute  offload" : "recompute", "step ms", "tokens/s", "TFLOP/s",
              "peak", "memory", "bubble", "exposed comm");
  for (size_t i = 0; i < shown; ++i) {
    const plan::Plan& p = r.plans[i];
    const TrainConfig& k = p.config;
    const bool piped = k.mesh.find("pipe=") != std::string::npos;
    std::printf(
        "%-3zu %-24s %-16s %-11s %-2lld %-3lld %-4d %-*s %9.2f %10.0f %8.4f %5.1f%% %10s "
        "%6.1f%% %s\n",
        i + 1, k.mesh.empty() ? "(1 rank)" : k.mesh.c_str(), p.layout_label.c_str(),
        piped ? k.schedule.c_str() : "-", static_cast<long long>(k.chunks),
        static_cast<long long>(k.microbatches), k.zero, recompute_width, recompute_cell(k).c_str(),
        p.prediction.step_s * 1e3, p.tokens_per_s, p.tflops_per_device, 100 * p.fraction_of_peak,
        plan::format_size(p.prediction.peak_bytes).c_str(),
        100 * p.prediction.bubble_s / p.prediction.step_s, comm_shares(p.prediction).c_str());
  }
  print_legend();
  std::printf("\ncommands:\n");
  for (size_t i = 0; i < shown; ++i) std::printf("  %zu: %s\n", i + 1, r.plans[i].command.c_str());
  if (opt.explain) {
    std::printf("\n");
    explain(r);
  }
  return 0;
}

}  // namespace

plan::PlanRequest plan_request(const ConfigOptions& c, const TrainConfig& base, int ranks) {
  plan::PlanRequest q;
  q.base = base;
  q.config_path = c.path;
  q.overrides = c.overrides;
  // Flags for keys the search does not choose travel with each plan's command.
  if (!c.offload.empty()) q.overrides.push_back("offload=" + c.offload);
  q.offload_fixed = !c.offload.empty();
  if (!c.device.empty()) q.overrides.push_back("device=" + c.device);
  q.ranks = ranks;
  if (!c.mesh.empty()) q.mesh = c.mesh;
  if (!c.layout.empty()) q.layout = c.layout;
  if (!c.schedule.empty()) q.schedule = c.schedule;
  if (!c.recompute.empty()) q.recompute = c.recompute;
  if (c.chunks > 0) q.chunks = static_cast<int>(c.chunks);
  if (c.microbatches > 0) q.microbatches = static_cast<int>(c.microbatches);
  if (c.zero >= 0) q.zero = c.zero;
  if (!base.memory_limit.empty()) q.memory_limit = parse_bytes(base.memory_limit);
  q.cost.precision = base.precision == "bf16" ? plan::Precision::kBF16 : plan::Precision::kF32;
  q.cost.threads = c.threads > 0 ? c.threads : std::max(1, plan::core_count() / std::max(1, ranks));
  return q;
}

TrainConfig apply_auto_plan(const ConfigOptions& options, TrainConfig config, int ranks,
                            bool announce) {
  const std::string cached = plan::default_profile_path();
  if (ranks > 1 && !std::filesystem::exists(cached))
    TS_THROW("--plan auto under mpirun needs this machine's profile, and none is cached at ",
             cached, ": run `tessel calibrate` once first");
  const std::unique_ptr<plan::HardwareModel> hw = plan::load_or_calibrate("", nullptr);
  plan::PlanRequest q = plan_request(options, config, ranks);
  q.oversubscribe = true;  // the ranks are launched already: plan for them all
  const plan::PlanResult r = plan::search_plans(q, *hw);
  const plan::Plan& best = r.plans.front();
  const TrainConfig& chosen = best.config;
  config.mesh = chosen.mesh;
  config.layout = chosen.layout;
  config.schedule = chosen.schedule;
  config.chunks = chosen.chunks;
  config.microbatches = chosen.microbatches;
  config.zero = chosen.zero;
  config.recompute = chosen.recompute;
  config.offload = chosen.offload;
  config.threads = q.cost.threads;
  config.validate();
  if (announce)
    std::printf(
        "plan auto: the best of %d configurations for %d ranks (%.2f s):%s --threads %d; "
        "predicted %.2f ms per step, peak %s per rank\n",
        r.considered, ranks, r.search_s, plan::plan_flags(config).c_str(), config.threads,
        best.prediction.step_s * 1e3, plan::format_size(best.prediction.peak_bytes).c_str());
  return config;
}

Command add_plan_command(CLI::App& app) {
  auto opt = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand(
      "plan",
      "rank every mesh, layout, schedule, ZeRO and recompute choice by predicted step time");
  opt->config.add_to(sub, /*with_steps=*/false);
  sub->add_option("--ranks", opt->ranks,
                  "number of ranks (devices) to plan for (default: a published run's gpus)")
      ->check(at_least(1));
  sub->add_option("--cluster", opt->cluster,
                  "a cluster file (examples/clusters/) to plan for (default: a published run's)");
  sub->add_option("--profile", opt->profile,
                  "this machine's profile (tessel calibrate); default: the cached one, "
                  "calibrating when there is none");
  sub->add_option("--top", opt->top, "plans to show (default 10)")->check(at_least(1));
  sub->add_flag("--ignore-device-memory", opt->ignore_device_memory,
                "keep plans whose predicted memory exceeds the device's (to time a published "
                "run's configuration); --memory-limit still applies");
  sub->add_flag("--oversubscribe", opt->oversubscribe,
                "plan more ranks than the hardware has devices; ranks sharing a core are costed "
                "at their share of it");
  sub->add_flag("--exhaustive", opt->exhaustive,
                "cost every candidate exactly instead of screening them first and costing the "
                "best --top (at least 10) exactly (slow at scale; the reference)");
  sub->add_flag("--skip-probe", opt->skip_probe,
                "do not compare this machine's profile with a quick probe of the machine now "
                "(about 50 ms; it warns when they differ by more than 20%)");
  sub->add_flag("--json", opt->json, "print one JSON object instead of the table");
  sub->add_flag("--explain", opt->explain,
                "break the best plan and the runner-up into compute, communication, bubble and "
                "optimizer time");
  sub->add_flag("--compare-published", opt->compare_published,
                "with a published run's config (examples/published/): its configuration's "
                "predicted step time and peak memory against the published throughput and the "
                "device's memory");
  sub->add_flag("--free", opt->free,
                "with a published run's config: take only its GPU count and cluster, and search "
                "every knob the command line leaves open (with --compare-published: that "
                "search's best plan against the published configuration)");
  return {sub, [opt] { return run_plan(*opt); }};
}

}  // namespace tessel::cli
