#include "tessel/plan/measured_einsums.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include "tessel/kernels/einsum.h"
#include "tessel/plan/forwarding_hardware.h"
#include "tessel/plan/median_timing.h"

namespace tessel::plan {
namespace {

// The hardware, recording every einsum it has no measurement of.
class EinsumRecorder : public ForwardingHardware {
 public:
  using ForwardingHardware::ForwardingHardware;
  std::optional<double> measured_einsum_seconds(const Shape& a, const Shape& b, const Shape& out,
                                                int threads) const override {
    std::optional<double> measured = inner().measured_einsum_seconds(a, b, out, threads);
    if (!measured && seen_.insert(einsum_key(a, b, out, threads)).second)
      todo_.push_back({a, b, out, threads});
    return measured;
  }
  std::vector<EinsumShapes> todo() const { return todo_; }

 private:
  mutable std::set<std::string> seen_;
  mutable std::vector<EinsumShapes> todo_;
};

}  // namespace

std::string einsum_key(const Shape& a, const Shape& b, const Shape& out, int threads) {
  return a.to_string() + ";" + b.to_string() + ";" + out.to_string() + "@" +
         std::to_string(threads);
}

double time_einsum_alone(const EinsumShapes& e, double min_seconds) {
  const kernels::EinsumPlan plan = kernels::plan_einsum(e.a, e.b, e.out);
  AlignedBuffer a = filled_floats(e.a.numel()), b = filled_floats(e.b.numel()),
                out = filled_floats(e.out.numel()),
                scratch = filled_floats(plan.scratch_elements());
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(e.threads);
  const double seconds = median_seconds(min_seconds, 5, [&] {
    kernels::einsum(plan, a.as<float>(), b.as<float>(), out.as<float>(), scratch.as<float>());
  });
  omp_set_num_threads(saved_threads);
  return seconds;
}

std::vector<EinsumShapes> einsums_to_measure(const PlanRequest& request, const HardwareModel& hw) {
  if (request.cost.precision != Precision::kF32) return {};
  const EinsumRecorder recorder(hw);
  PlanRequest q = request;
  q.exhaustive = true;  // every candidate's einsums, not only the best screened
  search_plans(q, recorder);
  return recorder.todo();
}

std::vector<MeasuredEinsum> measure_einsums(const std::vector<EinsumShapes>& todo, bool progress) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<MeasuredEinsum> out;
  for (const EinsumShapes& e : todo) out.push_back({e, time_einsum_alone(e, 0.02)});
  if (progress)
    std::fprintf(stderr, "measured %zu einsums on their own shapes in %.1f s\n", out.size(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return out;
}

}  // namespace tessel::plan
