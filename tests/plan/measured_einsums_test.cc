// Einsums measured on their exact shapes (plan/measured_einsums.h): the
// profile charges a measured einsum its time alone times the in-situ
// factor and every other one the grid's estimate; the table reads and
// writes strictly (errors name the key); with_einsums() replaces an entry
// of the same key; einsums_to_measure() lists every einsum a search prices
// without a measurement, once, and nothing once they are measured; a real
// timing alone is positive. Timings are not asserted otherwise.
#include "tessel/plan/measured_einsums.h"

#include <gtest/gtest.h>

#include <set>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "synthetic_profile.h"
#include "tessel/plan/cost_model.h"
#include "tessel/plan/instruction_timing.h"

namespace tessel::plan {
namespace {

struct EinsumOf {
  const Graph& g;
  const Program::InstructionInfo& ins;
  EinsumShapes shapes(int threads) const {
    const Node& n = g.node(ins.node);
    return {g.node(n.inputs[0]).shape, g.node(n.inputs[1]).shape, n.shape, threads};
  }
};

TEST(MeasuredEinsums, AMeasuredEinsumIsChargedItsTimeTimesTheInSituFactor) {
  const std::unique_ptr<TimedProgram> timed = timed_training_program(tiny_gpt_config(1, 2));
  const Graph& g = timed->program->graph();
  std::vector<Program::InstructionInfo> einsums;
  for (const Program::InstructionInfo& ins : timed->program->instruction_info())
    if (ins.einsum) einsums.push_back(ins);
  ASSERT_GE(einsums.size(), 2u);
  MachineProfileData d = synthetic_profile_data();
  const MachineProfile plain(d, "p.json");
  d.einsums = {{EinsumOf{g, einsums[0]}.shapes(1), 0.25}};
  d.einsum_in_situ = {{1, 20, 2.0}};  // 2x at every size
  const MachineProfile measured(d, "p.json");
  EXPECT_DOUBLE_EQ(einsum_seconds(measured, g, einsums[0], {}), 0.5);
  // At 2 threads the entry (1 thread) does not apply: the grid's estimate.
  CostOptions two;
  two.threads = 2;
  EXPECT_DOUBLE_EQ(einsum_seconds(measured, g, einsums[0], two),
                   2 * einsum_seconds(plain, g, einsums[0], two));
  // Another einsum (other shapes): the grid's estimate x the factor.
  auto key = [&](const Program::InstructionInfo& ins) {
    const EinsumShapes e = EinsumOf{g, ins}.shapes(1);
    return einsum_key(e.a, e.b, e.out, 1);
  };
  int others = 0;
  for (const Program::InstructionInfo& ins : einsums) {
    if (key(ins) == key(einsums[0])) continue;
    ++others;
    EXPECT_DOUBLE_EQ(einsum_seconds(measured, g, ins, {}), 2 * einsum_seconds(plain, g, ins, {}));
  }
  EXPECT_GT(others, 0);
}

TEST(MeasuredEinsums, TheProfileReadsAndWritesTheTableStrictly) {
  MachineProfileData d = synthetic_profile_data();
  const Shape a{{"seq", 16}, {"d", 32}}, b{{"d", 32}, {"ff", 64}}, out{{"seq", 16}, {"ff", 64}};
  d.einsums = {{{a, b, out, 1}, 1e-5}, {{a, b, out, 2}, 6e-6}};
  const nlohmann::json j = MachineProfile(d, "p.json").to_json();
  const MachineProfile back = MachineProfile::from_json(j, "p.json");
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.measured_einsum_seconds(a, b, out, 2), 6e-6);
  EXPECT_FALSE(back.measured_einsum_seconds(a, b, out, 4).has_value());
  EXPECT_FALSE(back.measured_einsum_seconds(b, a, out, 1).has_value());

  auto error = [](const nlohmann::json& bad) {
    return error_of([&] { MachineProfile::from_json(bad, "p.json"); });
  };
  nlohmann::json bad = j;
  bad["einsums"][1]["a"][0][1] = 0;
  EXPECT_NE(error(bad).find("einsums[1].a"), std::string::npos) << error(bad);
  bad = j;
  bad["einsums"][0]["seconds"] = -1;
  EXPECT_NE(error(bad).find("einsums[0].seconds"), std::string::npos) << error(bad);
  bad = j;
  bad["einsums"][1]["threads"] = 1;  // now the same key as [0]
  EXPECT_NE(error(bad).find("listed twice"), std::string::npos) << error(bad);
  bad = j;
  bad["einsums"][0]["flops"] = 1;
  EXPECT_NE(error(bad).find("unknown key 'einsums[0].flops'"), std::string::npos) << error(bad);
}

TEST(MeasuredEinsums, WithEinsumsAddsAndReplacesByKey) {
  MachineProfileData d = synthetic_profile_data();
  const Shape a{{"m", 8}, {"k", 8}}, b{{"k", 8}, {"n", 8}}, out{{"m", 8}, {"n", 8}};
  d.einsums = {{{a, b, out, 1}, 1e-5}};
  const MachineProfile p(d, "p.json");
  const MachineProfile q = p.with_einsums({{{a, b, out, 1}, 3e-5}, {{a, b, out, 2}, 2e-5}});
  EXPECT_EQ(q.data().einsums.size(), 2u);
  EXPECT_EQ(q.measured_einsum_seconds(a, b, out, 1), 3e-5);
  EXPECT_EQ(q.measured_einsum_seconds(a, b, out, 2), 2e-5);
  EXPECT_EQ(q.source(), "p.json");
}

TEST(MeasuredEinsums, ASearchListsEachUnmeasuredEinsumOnceAndNoneOnceMeasured) {
  const MachineProfile profile(synthetic_profile_data(), "p.json");
  PlanRequest q;
  q.base = tiny_gpt_config(2, 4);
  q.ranks = 2;
  q.oversubscribe = true;
  const std::vector<EinsumShapes> todo = einsums_to_measure(q, profile);
  ASSERT_FALSE(todo.empty());
  std::set<std::string> keys;
  for (const EinsumShapes& e : todo)
    EXPECT_TRUE(keys.insert(einsum_key(e.a, e.b, e.out, e.threads)).second);
  // Fake measurements of all of them: nothing is left, and the search's
  // predictions now charge them (1 ms each: far slower than the grid).
  std::vector<MeasuredEinsum> fake;
  for (const EinsumShapes& e : todo) fake.push_back({e, 1e-3});
  const MachineProfile measured = profile.with_einsums(fake);
  EXPECT_TRUE(einsums_to_measure(q, measured).empty());
  EXPECT_GT(search_plans(q, measured).plans.front().prediction.compute_s,
            search_plans(q, profile).plans.front().prediction.compute_s);
  // bf16 searches are not measured (the table is f32).
  q.cost.precision = Precision::kBF16;
  EXPECT_TRUE(einsums_to_measure(q, profile).empty());
}

TEST(MeasuredEinsums, TimingAloneIsPositive) {
  const EinsumShapes e{Shape{{"m", 64}, {"k", 32}}, Shape{{"k", 32}, {"n", 16}},
                       Shape{{"m", 64}, {"n", 16}}, 1};
  EXPECT_GT(time_einsum_alone(e, 0.001), 0);
  EXPECT_EQ(measure_einsums({e, e}, false).size(), 2u);
}

}  // namespace
}  // namespace tessel::plan
