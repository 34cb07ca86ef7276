// Golden test: Tessel's GPT against PyTorch in float64.
//
// tests/golden/gpt_tiny.safetensors (written by scripts/make_golden.py)
// holds a batch, every parameter (F32, "param.<name>"), and what PyTorch
// computes from them in float64: the logits, the loss and every parameter's
// gradient ("grad.<name>"). This test builds Tessel's GPT with the same
// config, with fused attention and with the unfused einsum-softmax-einsum
// path, binds the fixture's parameters, runs one forward + backward in f32
// and compares each tensor with the norm max|tessel - torch| / max|torch|,
// which must be at most 1e-5. The parameter set must match the fixture's
// exactly (a new or renamed parameter fails the test: regenerate the
// fixture). Regenerating: see scripts/make_golden.py; the disabled test
// below exports Tessel's initial parameters for it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "golden_fixture.h"

namespace tessel {
namespace {

constexpr double kGptTolerance = 1e-5;

// The fixture's model: small enough that its float64 gradients stay < 200 KB.
TrainConfig golden_config(const std::string& attention = "fused") {
  TrainConfig c;
  c.model = "gpt";
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.context = 8;
  c.vocab = 64;
  c.batch = 2;
  c.dropout = 0.0;
  c.attention = attention;
  return c;
}

std::string gpt_fixture_path() {
  return std::string(TESSEL_SOURCE_DIR) + "/tests/golden/gpt_tiny.safetensors";
}

// Fused attention (the default) and the einsum-softmax-einsum path both.
class GoldenGptAttention : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenGptAttention, ForwardAndBackwardMatchPyTorchFloat64) {
  const TrainConfig c = golden_config(GetParam());
  const SafetensorsFile fx = read_safetensors(gpt_fixture_path());
  golden::expect_metadata(fx, {{"n_layer", std::to_string(c.n_layer)},
                               {"n_head", std::to_string(c.n_head)},
                               {"d_model", std::to_string(c.d_model)},
                               {"context", std::to_string(c.context)},
                               {"vocab", std::to_string(c.vocab)},
                               {"batch", std::to_string(c.batch)}});
  golden::check_against_fixture(c, fx, kGptTolerance);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenGptAttention, ::testing::Values("fused", "unfused"),
                         [](const auto& info) { return info.param; });

// Writes Tessel's initial parameters (seed 1) for the golden config to
// $TESSEL_GOLDEN_EXPORT, for scripts/make_golden.py. Run with
// --gtest_also_run_disabled_tests --gtest_filter=GoldenGpt.DISABLED_ExportInitialParameters.
TEST(GoldenGpt, DISABLED_ExportInitialParameters) {
  const char* path = std::getenv("TESSEL_GOLDEN_EXPORT");
  ASSERT_NE(path, nullptr) << "set TESSEL_GOLDEN_EXPORT to the output path";
  golden::export_initial_parameters(golden_config(), path);
}

}  // namespace
}  // namespace tessel
