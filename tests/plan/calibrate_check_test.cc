// `tessel calibrate --check`'s library half (plan/calibrate/calibrate_check.h): a
// config's program is timed instruction by instruction and every instruction
// is priced as the cost model prices it. Timings are not asserted (the
// machine is shared); what is: every instruction of the program is counted
// once, measured, and priced exactly as the cost model's single-program
// prediction prices it.
#include "tessel/plan/calibrate/calibrate_check.h"

#include <gtest/gtest.h>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "synthetic_profile.h"
#include "tessel/plan/model/cost_model.h"

namespace tessel::plan {
namespace {

TEST(CalibrateCheck, EveryInstructionIsMeasuredAndPricedAsTheCostModelPricesIt) {
  const MachineProfile profile(synthetic_profile_data(), "p.json");
  const TrainConfig c = tiny_gpt_config(2, 4);
  const ProgramCheck check = check_program(c, profile, 1, 2);
  ASSERT_FALSE(check.kinds.empty());
  double measured = 0, predicted = 0, einsum_predicted = 0;
  int einsums = 0;
  for (const CheckedKind& k : check.kinds) {
    EXPECT_GT(k.count, 0) << k.kind;
    EXPECT_GT(k.measured_s, 0) << k.kind;
    EXPECT_GT(k.predicted_s, 0) << k.kind;
    measured += k.measured_s;
    predicted += k.predicted_s;
    if (k.kind.rfind("einsum ", 0) == 0) {
      einsums += k.count;
      einsum_predicted += k.predicted_s;
      EXPECT_GT(k.gemm_flops, 0) << k.kind;
    }
  }
  EXPECT_GT(einsums, 0);
  EXPECT_NEAR(measured, check.measured_s, 1e-12);
  EXPECT_NEAR(predicted, check.predicted_s, 1e-12);
  EXPECT_NEAR(einsum_predicted, check.einsum_predicted_s, 1e-12);
  // The same prices as the cost model: its one-rank compute is the same
  // program's instructions plus the feed (a copy of the token ids, about a
  // microsecond here), the program compiled by compile_rank instead.
  const StepPrediction step = predict_step(c, {0}, profile, {});
  EXPECT_LE(check.predicted_s, step.compute_s);
  EXPECT_NEAR(check.predicted_s, step.compute_s, 0.02 * step.compute_s);
}

TEST(CalibrateCheck, RefusesWhatItCannotTime) {
  const MachineProfile profile(synthetic_profile_data(), "p.json");
  TrainConfig c = tiny_gpt_config(2, 4);
  EXPECT_NE(error_of([&] { check_program(c, profile, 1, 0); }).find("repeats"), std::string::npos);
  // bf16 on a profile without bf16 figures: refused before timing, naming it.
  c.precision = "bf16";
  EXPECT_NE(error_of([&] { check_program(c, profile, 1, 1); }).find("no bf16 peak"),
            std::string::npos);
}

}  // namespace
}  // namespace tessel::plan
