#include "step_breakdown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/kernels/einsum.h"
#include "tessel/plan/calibrate/instruction_timing.h"

namespace tessel::cli {

StepBreakdown::StepBreakdown(Program& program) : program_(program) {
  for (const Program::InstructionInfo& ins : program.instruction_info()) {
    if (ins.bucket >= 0) continue;  // a bucket member runs without a hook
    Kind& kind = kinds_[plan::instruction_kind(program.graph(), ins)];
    kind_of_[ins.node] = &kind;
    kind.count += 1;
    if (const kernels::EinsumPlan* e = ins.einsum)
      kind.flops += 2.0 * e->batch * e->m * e->n * e->k;
  }
  program_.set_progress_hook([this] { on_progress(); });
}

StepBreakdown::~StepBreakdown() { program_.set_progress_hook(nullptr); }

void StepBreakdown::begin_step() {
  timing_ = true;
  open_.reset();
  program_done_ = false;
  started_ = plan::device_done_seconds(program_);
}

void StepBreakdown::on_progress() {
  if (!timing_) return;
  const double now = plan::device_done_seconds(program_);
  if (open_)
    kind_of_.at(*open_)->seconds += now - started_;
  else if (!program_done_)
    before_s_ += now - started_;
  else
    TS_THROW("bench step --breakdown: the training program ran twice in one step");
  open_ = program_.running_node();
  if (!open_) {
    program_done_ = true;
    runs_ += 1;
  }
  started_ = now;
}

void StepBreakdown::end_step() {
  const double now = plan::device_done_seconds(program_);
  TS_CHECK(program_done_ && !open_,
           "bench step --breakdown: a step ended without running the training program");
  after_s_ += now - started_;
  timing_ = false;
  steps_ += 1;
}

nlohmann::json StepBreakdown::to_json() const {
  TS_CHECK(steps_ > 0, "bench step --breakdown: no step was timed");
  const double per_step_ms = 1e3 / steps_;
  std::vector<std::pair<std::string, Kind>> sorted(kinds_.begin(), kinds_.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total_s = before_s_ + after_s_;
  nlohmann::json kinds = nlohmann::json::array();
  for (const auto& [name, k] : sorted) {
    total_s += k.seconds;
    nlohmann::json kind = {{"kind", name}, {"count", k.count}, {"ms", k.seconds * per_step_ms}};
    if (k.flops > 0 && k.seconds > 0) kind["gflops"] = k.flops * steps_ / k.seconds / 1e9;
    kinds.push_back(kind);
  }
  return {{"steps", steps_},
          {"program_runs", runs_},
          {"step_ms_mean", total_s * per_step_ms},
          {"before_ms", before_s_ * per_step_ms},
          {"after_ms", after_s_ * per_step_ms},
          {"kinds", kinds}};
}

std::string StepBreakdown::table() const {
  const nlohmann::json j = to_json();
  const double step_ms = j["step_ms_mean"].get<double>();
  std::string out;
  char line[160];
  auto row = [&](const std::string& name, const std::string& count, double ms,
                 const std::string& gflops) {
    std::snprintf(line, sizeof(line), "%-34s %6s %10.3f %6.1f%% %9s\n", name.c_str(), count.c_str(),
                  ms, 100.0 * ms / step_ms, gflops.c_str());
    out += line;
  };
  std::snprintf(line, sizeof(line), "%-34s %6s %10s %7s %9s\n", "where a step goes (mean of steps)",
                "count", "ms", "share", "GFLOP/s");
  out += line;
  for (const nlohmann::json& k : j["kinds"]) {
    std::string gflops;
    if (k.contains("gflops")) gflops = std::to_string(std::lround(k["gflops"].get<double>()));
    row(k["kind"].get<std::string>(), std::to_string(k["count"].get<int>()), k["ms"].get<double>(),
        gflops);
  }
  row("before the program (feeding)", "", j["before_ms"].get<double>(), "");
  row("after it (buckets, optimizer)", "", j["after_ms"].get<double>(), "");
  row("step", "", step_ms, "");
  return out;
}

}  // namespace tessel::cli
