// bf16 mixed precision under real mpirun: every mesh trains to within 2e-3
// relative of one process in bf16 (per step, over 6 steps), recomputation is
// bitwise identical to storing, and bf16 really changes the result (so the
// option cannot be a silent no-op). The memory side (predicted == measured
// in bf16) is in layout_invariance_test.cc's MeasuredMemory cases.
#include "layout/layout_harness.h"
#include "tessel/kernels/einsum_bf16.h"

namespace tessel {
namespace {

constexpr double kBf16RelTol = 2e-3;

nlohmann::json bf16_config() {
  nlohmann::json c = gpt_config();
  c["steps"] = 6;
  c["eval_every"] = 0;
  c["precision"] = "bf16";
  return c;
}

class Bf16Training : public LayoutInvariance {
 protected:
  void SetUp() override {
    if (!kernels::onednn_has_bf16_matmul())
      GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (" << kernels::onednn_cpu_isa()
                   << "); bf16 needs AVX-512";
  }
  static const TrainRun& bf16_reference() {
    static TrainRun r = train("bf16_single", bf16_config(), 0);
    return r;
  }
};

void expect_close(const TrainRun& got, const TrainRun& want, double tol, const std::string& what) {
  ASSERT_EQ(got.steps.size(), want.steps.size()) << what;
  for (size_t s = 0; s < want.steps.size(); ++s) {
    double a = got.steps[s]["loss"], b = want.steps[s]["loss"];
    EXPECT_LE(std::abs(a - b), tol * std::abs(b))
        << what << ": loss at step " << s << ": " << a << " vs " << b;
  }
}

struct Bf16Case {
  const char* name;
  int ranks;
  const char* mesh;
  const char* args;
};
void PrintTo(const Bf16Case& c, std::ostream* out) { *out << c.name; }

class Bf16Layouts : public Bf16Training, public ::testing::WithParamInterface<Bf16Case> {};

TEST_P(Bf16Layouts, LossesWithinTwoThousandthsOfOneProcess) {
  const Bf16Case& c = GetParam();
  TrainRun got = train(c.name, bf16_config(), c.ranks, c.mesh, "", c.args);
  expect_close(got, bf16_reference(), kBf16RelTol, c.name);
  EXPECT_NE(got.output.find("precision bf16: matmul on "), std::string::npos) << got.output;
}

INSTANTIATE_TEST_SUITE_P(Bf16, Bf16Layouts,
                         ::testing::Values(Bf16Case{"bf16_data2", 2, "data=2", ""},
                                           Bf16Case{"bf16_model2", 2, "model=2", ""},
                                           Bf16Case{"bf16_data2_model2", 4, "data=2,model=2", ""},
                                           Bf16Case{"bf16_pipe2", 2, "pipe=2", "--microbatches 2"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(Bf16Training, RecomputeIsBitwiseEqualToStoring) {
  nlohmann::json config = bf16_config();
  config["recompute"] = "blocks";
  TrainRun got = train("bf16_recompute_blocks", config, 0);
  const TrainRun& want = bf16_reference();
  ASSERT_EQ(got.steps.size(), want.steps.size());
  for (size_t s = 0; s < want.steps.size(); ++s)
    EXPECT_EQ(got.steps[s]["loss"].get<double>(), want.steps[s]["loss"].get<double>())
        << "step " << s;
  for (const TensorRecord& w : want.params.tensors) {
    const TensorRecord* g = got.params.find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(g->bytes, w.bytes) << "parameter " << w.name << " differs";
  }
}

TEST_F(Bf16Training, ChangesTheResultButStaysClose) {
  nlohmann::json f32 = bf16_config();
  f32["precision"] = "f32";
  TrainRun want = train("bf16_vs_f32", f32, 0);
  const TrainRun& got = bf16_reference();
  ASSERT_EQ(got.steps.size(), want.steps.size());
  bool differs = false;
  for (size_t s = 0; s < want.steps.size(); ++s)
    differs |= got.steps[s]["loss"].get<double>() != want.steps[s]["loss"].get<double>();
  EXPECT_TRUE(differs) << "bf16 trained bit-identically to f32: the GEMMs did not run in bf16";
  expect_close(got, want, 2e-2, "bf16 vs f32");
}

}  // namespace
}  // namespace tessel
