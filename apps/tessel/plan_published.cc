#include "plan_published.h"

#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "tessel/base/error.h"
#include "tessel/plan/format_size.h"

namespace tessel::cli {

ConfigOptions with_published_knobs(ConfigOptions o, const plan::PublishedRun& r, int ranks,
                                   int64_t batch) {
  if (o.mesh.empty() && ranks == r.gpus) o.mesh = r.mesh;  // else the published mesh cannot apply
  if (o.microbatches <= 0 && r.microbatches && (!o.mesh.empty() || ranks == 1)) {
    const Mesh mesh = Mesh::parse(o.mesh);
    const int64_t data = mesh.size_of("data");
    if (batch % data == 0 && (batch / data) % *r.microbatches == 0)
      o.microbatches = *r.microbatches;
  }
  if (o.schedule.empty() && r.schedule) o.schedule = *r.schedule;
  if (o.chunks <= 0 && r.chunks) o.chunks = *r.chunks;
  if (o.zero < 0 && r.zero) o.zero = *r.zero;
  if (o.recompute.empty() && r.recompute) o.recompute = *r.recompute;
  if (o.layout.empty() && r.layout) o.layout = *r.layout;
  return o;
}

std::string searched_knobs(const ConfigOptions& o) {
  std::string out;
  auto add = [&](bool searched, const char* knob) {
    if (searched) out += str_cat(out.empty() ? "" : ", ", knob);
  };
  add(o.mesh.empty(), "mesh");
  add(o.layout.empty(), "layout");
  const bool piped = o.mesh.empty() || o.mesh.find("pipe=") != std::string::npos;
  add(piped && o.schedule.empty(), "schedule");
  add(piped && o.chunks <= 0 && (o.schedule.empty() || o.schedule == "interleaved"), "chunks");
  add(o.microbatches <= 0, "micro-batches");
  add(o.zero < 0, "zero");
  add(o.recompute.empty(), "recompute");
  return out;
}

namespace {

// The free search (every knob the command line leaves open), as JSON: its
// counts and best plan, or the error that says why nothing fits.
nlohmann::json free_search(const CompareRequest& c, const plan::HardwareModel& hw,
                           double published_predicted_s) {
  plan::PlanRequest q = plan_request(c.options, c.model, c.ranks);
  q.cost.overlap_data_parallel = c.run.data_parallel_overlap;
  q.check_device_memory = !c.ignore_device_memory;
  try {
    const plan::PlanResult r = plan::search_plans(q, hw);
    const plan::Plan& best = r.plans.front();
    nlohmann::json j = search_counts_json(r);
    j["step_s"] = best.prediction.step_s;
    j["no_slower"] = best.prediction.step_s <= published_predicted_s;
    j["plan"] = plan_json(best);
    return j;
  } catch (const Error& e) {
    return {{"error", e.what()}};
  }
}

void print_comparison(const CompareRequest& c, const nlohmann::json& j) {
  const nlohmann::json &pub = j["published"], &pred = j["predicted"];
  std::printf("published run: %s\n", c.run.run.c_str());
  if (!c.run.source.empty()) std::printf("  source: %s\n", c.run.source.c_str());
  std::printf(
      "  configuration:%s%s\n", pred["plan"]["flags"].get<std::string>().c_str(),
      pred["searched"].get<std::string>().empty()
          ? ""
          : str_cat(" (searched, not stated: ", pred["searched"].get<std::string>(), ")").c_str());
  std::printf(
      "  step time: published %.2f s (%.1f TFLOP/s per GPU, FLOPs counted %s), predicted %.2f s "
      "(%.1f TFLOP/s per GPU counted the same way): %+.1f%%\n",
      pub["step_s"].get<double>(), pub["tflops_per_gpu"].get<double>(),
      c.run.flops_with_recompute ? "with the recomputed forward (Narayanan et al., eq. 3)"
                                 : "for the model (forward and backward)",
      pred["step_s"].get<double>(), pred["tflops_per_gpu"].get<double>(),
      100 * pred["error"].get<double>());
  const int64_t peak = pred["peak_bytes"], device = pred["device_memory_bytes"];
  std::printf("  memory: predicted peak %s (rank %d); ", plan::format_size(peak).c_str(),
              pred["plan"]["peak_rank"].get<int>());
  if (device <= 0)
    std::printf("the hardware file states no device memory\n");
  else
    std::printf("the device has %s: %s (%lld%%)\n", plan::format_size(device).c_str(),
                peak <= device ? "fits" : "does not fit",
                static_cast<long long>(peak * 100 / device));
  if (!j.contains("free")) return;
  const nlohmann::json& f = j["free"];
  if (f.contains("error")) {
    std::printf("free search: %s\n", f["error"].get<std::string>().c_str());
    return;
  }
  std::printf(
      "free search (the knobs the command line leaves open): %d configurations, %d costed "
      "exactly, %.2f s\n  best:%s: %.2f s per step (%+.1f%% against the published configuration "
      "as predicted), peak %s\n",
      f["considered"].get<int>(), f["exact"].get<int>(), f["search_s"].get<double>(),
      f["plan"]["flags"].get<std::string>().c_str(), f["step_s"].get<double>(),
      100 * (f["step_s"].get<double>() / pred["step_s"].get<double>() - 1),
      plan::format_size(f["plan"]["peak_bytes"].get<int64_t>()).c_str());
}

}  // namespace

int compare_published(const CompareRequest& c, const plan::HardwareModel& hw) {
  // The published configuration: the block's knobs under the command
  // line's, the rest searched; every choice kept whatever its memory (the
  // peak is reported against the device's below).
  const ConfigOptions knobs = with_published_knobs(c.options, c.run, c.ranks, c.model.batch);
  plan::PlanRequest q = plan_request(knobs, c.model, c.ranks);
  q.cost.overlap_data_parallel = c.run.data_parallel_overlap;
  q.check_device_memory = false;
  q.memory_limit = 0;
  q.exhaustive = !knobs.mesh.empty();  // few candidates: cost each, to pick by memory below
  const plan::PlanResult r = plan::search_plans(q, hw);
  // Of the unstated knobs' choices, the fastest that fits the device, else the fastest.
  const int64_t device = hw.device_memory_bytes();
  const auto fitting = std::find_if(r.plans.begin(), r.plans.end(), [&](const plan::Plan& p) {
    return device > 0 && p.prediction.peak_bytes <= device;
  });
  const plan::Plan& p = fitting != r.plans.end() ? *fitting : r.plans.front();
  const double published_s = plan::published_step_seconds(c.run, c.model);
  const double flops = plan::narayanan_step_flops(c.model, c.run.flops_with_recompute);
  const double step = p.prediction.step_s;
  nlohmann::json j;
  j["published"] = {{"run", c.run.run},
                    {"source", c.run.source},
                    {"gpus", c.run.gpus},
                    {"cluster", c.run.cluster},
                    {"tflops_per_gpu", c.run.tflops_per_gpu},
                    {"flops_counted", c.run.flops_with_recompute ? "with_recompute" : "model"},
                    {"flops_per_step", flops},
                    {"step_s", published_s}};
  j["predicted"] = {{"step_s", step},
                    {"tflops_per_gpu", flops / (step * c.ranks) / 1e12},
                    {"error", step / published_s - 1},
                    {"peak_bytes", p.prediction.peak_bytes},
                    {"device_memory_bytes", device},
                    {"fits", device <= 0 || p.prediction.peak_bytes <= device},
                    {"searched", searched_knobs(knobs)},
                    {"search_s", r.search_s},
                    {"plan", plan_json(p)}};
  if (c.free) j["free"] = free_search(c, hw, step);
  if (c.json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    print_comparison(c, j);
  return j.contains("free") && j["free"].contains("error") ? 1 : 0;
}

}  // namespace tessel::cli
