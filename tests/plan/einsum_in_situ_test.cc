// The in-situ factor on einsums (plan/model/einsum_in_situ.h): the curve
// interpolates in log2 FLOPs and threads and clamps beyond its points, bad
// points are refused, the profile reads and writes it strictly (missing =
// factor 1), einsum_seconds carries it, and the measurement yields one
// finite, positive factor per octave of the reference program's einsums.
// Timings are not asserted (the machine is shared).
#include "tessel/plan/model/einsum_in_situ.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "synthetic_profile.h"
#include "tessel/plan/calibrate/instruction_timing.h"
#include "tessel/plan/model/cost_model.h"
#include "tessel/plan/profile/kernel_rates.h"

namespace tessel::plan {
namespace {

InSituCurve two_by_two() {
  return InSituCurve({{2, 30, 1.0}, {1, 30, 1.0}, {1, 20, 1.5}, {2, 20, 2.0}}, "p.json");
}

TEST(InSituCurve, InterpolatesInLogFlopsAndThreadsAndClampsBeyond) {
  const InSituCurve c = two_by_two();
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(20), 1), 1.5);
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(25), 1), 1.25);
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(10), 1), 1.5);  // below the smallest point
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(40), 1), 1.0);  // above the largest
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(25), 2), 1.5);
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(20), 8), 2.0);  // beyond the measured threads
  EXPECT_DOUBLE_EQ(InSituCurve().factor(1e9, 1), 1.0);
  EXPECT_DOUBLE_EQ(c.factor(0, 1), 1.0);  // an empty product
}

TEST(InSituCurve, APointBelowOneCountsAsOne) {
  const InSituCurve c({{1, 20, 0.5}, {1, 30, 1.5}}, "p.json");
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(20), 1), 1.0);
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(10), 1), 1.0);
  EXPECT_DOUBLE_EQ(c.factor(std::exp2(25), 1), 1.25);
  // The profile keeps the point as measured, and charges it as 1.
  MachineProfileData d = synthetic_profile_data();
  d.einsum_in_situ = {{1, 20, 0.5}, {1, 30, 1.5}};
  const MachineProfile p(d, "p.json");
  EXPECT_DOUBLE_EQ(p.to_json()["einsum_in_situ"][0]["factor"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(p.einsum_in_situ_factor(std::exp2(20), Precision::kF32, 1), 1.0);
}

TEST(InSituCurve, RefusesBadPointsNamingTheKey) {
  const std::string where = "p.json: key 'einsum_in_situ'";
  EXPECT_NE(error_of([&] {
              InSituCurve({{1, 20, 0}}, where);
            }).find("factor must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              InSituCurve({{0, 20, 1}}, where);
            }).find("threads must be at least 1"),
            std::string::npos);
  const std::string twice = error_of([&] { InSituCurve({{1, 20, 1}, {1, 20, 2}}, where); });
  EXPECT_NE(twice.find(where), std::string::npos) << twice;
  EXPECT_NE(twice.find("two points"), std::string::npos) << twice;
}

TEST(InSituCurve, TheProfileRoundTripsItAndWithoutItChargesFactorOne) {
  MachineProfileData d = synthetic_profile_data();
  d.einsum_in_situ = {{1, 20, 1.5}, {1, 30, 1.0}};
  const MachineProfile with(d, "p.json");
  const nlohmann::json j = with.to_json();
  EXPECT_EQ(MachineProfile::from_json(j, "p.json").to_json(), j);
  EXPECT_DOUBLE_EQ(with.einsum_in_situ_factor(std::exp2(25), Precision::kF32, 1), 1.25);

  nlohmann::json old = j;
  old.erase("einsum_in_situ");
  EXPECT_DOUBLE_EQ(
      MachineProfile::from_json(old, "p.json").einsum_in_situ_factor(1e9, Precision::kF32, 1), 1.0);

  nlohmann::json bad = j;
  bad["einsum_in_situ"][1]["factor"] = -1;
  std::string e = error_of([&] { MachineProfile::from_json(bad, "p.json"); });
  EXPECT_NE(e.find("einsum_in_situ[1].factor"), std::string::npos) << e;
  bad = j;
  bad["einsum_in_situ"][0]["colour"] = 1;
  e = error_of([&] { MachineProfile::from_json(bad, "p.json"); });
  EXPECT_NE(e.find("unknown key 'einsum_in_situ[0].colour'"), std::string::npos) << e;
}

TEST(InSituCurve, EinsumSecondsCarriesTheFactor) {
  MachineProfileData d = synthetic_profile_data();
  const MachineProfile plain(d, "p.json");
  d.einsum_in_situ = {{1, 25, 3.0}};  // one point: 3x at every size
  const MachineProfile slowed(d, "p.json");
  const std::unique_ptr<TimedProgram> timed = timed_training_program(tiny_gpt_config(1, 2));
  int einsums = 0;
  for (const Program::InstructionInfo& ins : timed->program->instruction_info()) {
    if (!ins.einsum) continue;
    ++einsums;
    const double base = einsum_seconds(plain, timed->program->graph(), ins, {});
    EXPECT_GT(base, 0);
    EXPECT_NEAR(einsum_seconds(slowed, timed->program->graph(), ins, {}), 3 * base, 1e-12 * base);
  }
  EXPECT_GT(einsums, 0);
}

TEST(MeasureInSitu, OneFinitePositiveFactorPerOctaveOfTheReferenceEinsums) {
  const MachineProfile grid_only(synthetic_profile_data(), "p.json");
  const std::vector<InSituPoint> points = measure_in_situ(grid_only, {1}, /*quick=*/true);
  ASSERT_FALSE(points.empty());
  // The reference program's einsum sizes at 1 and 8 sequences.
  double smallest = 1e300, largest = 0;
  for (int64_t batch : {1, 8}) {
    TrainConfig c = kernel_rate_config(true);
    c.batch = batch;
    const std::unique_ptr<TimedProgram> timed = timed_training_program(c);
    for (const Program::InstructionInfo& ins : timed->program->instruction_info())
      if (ins.einsum) {
        const kernels::EinsumPlan& e = *ins.einsum;
        const double x = std::log2(2.0 * e.batch * e.m * e.n * e.k);
        smallest = std::min(smallest, x);
        largest = std::max(largest, x);
      }
  }
  std::set<long> octaves;
  for (const InSituPoint& p : points) {
    EXPECT_EQ(p.threads, 1);
    EXPECT_TRUE(std::isfinite(p.factor) && p.factor > 0) << p.factor;
    EXPECT_GE(p.log2_flops, smallest - 1e-9);
    EXPECT_LE(p.log2_flops, largest + 1e-9);
    EXPECT_TRUE(octaves.insert(std::lround(p.log2_flops)).second) << p.log2_flops;
  }
  // Loads back as a curve.
  EXPECT_NO_THROW(InSituCurve(points, "measured"));
}

}  // namespace
}  // namespace tessel::plan
