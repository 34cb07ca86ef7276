// The op harness: every op of the op table goes through it.
//
// Each case (tests/common/op_cases.h) builds a small graph ending in the op,
// adds loss = sum(out * R) for fixed random weights R and differentiates it.
// Then:
//   1. fast kernels vs their `_ref` twins on the whole forward + backward
//      graph (so gradient ops are compared too);
//   2. the analytic gradient of every parameter against central finite
//      differences of the loss (reference kernels, double-accumulated).
// A test at the bottom checks that every differentiable OpKind has a case.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/op_cases.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

bool close(double a, double b, double rtol, double atol) {
  return std::abs(a - b) <= atol + rtol * std::max(std::abs(a), std::abs(b));
}

class OpHarness : public ::testing::TestWithParam<OpCase> {};

TEST_P(OpHarness, FastMatchesReference) {
  const OpCase& c = GetParam();
  Harness h = make_harness(c);
  std::vector<ValueId> outputs = {h.out, h.loss};
  outputs.insert(outputs.end(), h.grads.begin(), h.grads.end());
  Program fast(h.graph, outputs);
  Program ref(h.graph, outputs, CompileOptions{.reference_kernels = true});
  auto params_fast = h.param_values, params_ref = h.param_values;
  feed_harness(h, fast, params_fast);
  feed_harness(h, ref, params_ref);
  fast.run();
  ref.run();
  for (ValueId v : outputs) {
    const int64_t n = h.graph.node(v).shape.numel();
    const std::vector<float> a = fast.read_f32(v);
    const std::vector<float> b = ref.read_f32(v);
    for (int64_t e = 0; e < n; ++e)
      ASSERT_TRUE(close(a[e], b[e], 1e-5, 1e-6))
          << c.name << ": value %" << v << " (" << h.graph.node(v).name << ") element " << e
          << ": fast " << a[e] << " vs reference " << b[e];
  }
}

TEST_P(OpHarness, GradientMatchesFiniteDifferences) {
  const OpCase& c = GetParam();
  Harness h = make_harness(c);
  std::vector<ValueId> outputs = {h.loss};
  outputs.insert(outputs.end(), h.grads.begin(), h.grads.end());
  Program program(h.graph, outputs, CompileOptions{.reference_kernels = true});
  auto params = h.param_values;
  feed_harness(h, program, params);
  program.run();
  const auto& param_ids = h.graph.params();
  for (size_t pi = 0; pi < param_ids.size(); ++pi) {
    const std::string& name = h.graph.node(param_ids[pi]).name;
    std::vector<float>& values = params[name];
    std::vector<float> analytic = program.read_f32(h.grads[pi]);
    // Up to 8 elements per parameter, spread over it.
    const size_t count = values.size();
    const size_t stride = std::max<size_t>(1, count / 8);
    for (size_t e = 0; e < count; e += stride) {
      const float h_step = 1e-3f;
      const float saved = values[e];
      values[e] = saved + h_step;
      program.run();
      double plus = program.read_scalar(h.loss);
      values[e] = saved - h_step;
      program.run();
      double minus = program.read_scalar(h.loss);
      values[e] = saved;
      double numeric = (plus - minus) / (2.0 * h_step);
      EXPECT_TRUE(close(analytic[e], numeric, 2e-2, 2e-3))
          << c.name << ": d loss / d " << name << "[" << e << "]: analytic " << analytic[e]
          << " vs finite difference " << numeric;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpHarness, ::testing::ValuesIn(op_cases()),
                         [](const auto& info) { return info.param.name; });

// Every forward op with a gradient rule has a harness case.
TEST(OpHarnessCoverage, EveryDifferentiableOpHasACase) {
  std::set<OpKind> covered;
  for (const OpCase& c : op_cases()) {
    Harness h = make_harness(c);
    for (const Node& n : h.graph.nodes()) covered.insert(n.kind);
  }
  // Collectives exist only on sharded local graphs; the mpirun tests cover them.
  for (int k = 0; k < static_cast<int>(OpKind::kShardSlice); ++k) {
    OpKind kind = static_cast<OpKind>(k);
    EXPECT_TRUE(covered.count(kind)) << op_name(kind) << " is not exercised by the op harness";
  }
}

}  // namespace
}  // namespace tessel
