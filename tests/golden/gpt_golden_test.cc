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

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "tessel/autodiff/backward.h"
#include "tessel/compile/model_registry.h"
#include "tessel/runtime/program.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/param_store.h"

namespace tessel {
namespace {

constexpr double kTolerance = 1e-5;

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

struct Forward {
  Graph graph;
  TaskGraph out;
  std::vector<ValueId> grads;  // aligned with graph.params()
  std::vector<ValueId> outputs;
};

Forward build(const TrainConfig& c) {
  Forward f;
  GraphBuilder b(f.graph);
  f.out = build_model(c, b, c.batch, /*training=*/true);
  std::map<ValueId, ValueId> grads = build_backward(b, f.out.loss, f.graph.params());
  f.outputs = {f.out.loss, f.out.logits.value()};
  for (ValueId p : f.graph.params()) {
    f.grads.push_back(grads.at(p));
    f.outputs.push_back(grads.at(p));
  }
  return f;
}

std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i].size);
  return d;
}

const TensorRecord& need(const SafetensorsFile& f, const std::string& name,
                         const std::string& dtype, const std::vector<int64_t>& shape) {
  const TensorRecord* r = f.find(name);
  if (r == nullptr) throw std::runtime_error("golden fixture has no tensor '" + name + "'");
  if (r->dtype != dtype || r->shape != shape)
    throw std::runtime_error("golden fixture tensor '" + name + "' has the wrong dtype or shape");
  return *r;
}

// max|got - want| / max|want| over one tensor.
double relative_error(const float* got, const TensorRecord& want) {
  const size_t n = want.bytes.size() / sizeof(double);
  std::vector<double> w(n);
  std::memcpy(w.data(), want.bytes.data(), want.bytes.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

std::string fixture_path() {
  return std::string(TESSEL_SOURCE_DIR) + "/tests/golden/gpt_tiny.safetensors";
}

// Fused attention (the default) and the einsum-softmax-einsum path both.
class GoldenGptAttention : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenGptAttention, ForwardAndBackwardMatchPyTorchFloat64) {
  const TrainConfig c = golden_config(GetParam());
  const SafetensorsFile fx = read_safetensors(fixture_path());
  for (const char* key : {"n_layer", "n_head", "d_model", "context", "vocab", "batch"})
    ASSERT_TRUE(fx.metadata.count(key)) << key;
  ASSERT_EQ(fx.metadata.at("n_layer"), std::to_string(c.n_layer));
  ASSERT_EQ(fx.metadata.at("n_head"), std::to_string(c.n_head));
  ASSERT_EQ(fx.metadata.at("d_model"), std::to_string(c.d_model));
  ASSERT_EQ(fx.metadata.at("context"), std::to_string(c.context));
  ASSERT_EQ(fx.metadata.at("vocab"), std::to_string(c.vocab));
  ASSERT_EQ(fx.metadata.at("batch"), std::to_string(c.batch));

  Forward f = build(c);
  ParamStore params(f.graph);
  std::set<std::string> fixture_params;
  for (const TensorRecord& t : fx.tensors)
    if (t.name.rfind("param.", 0) == 0) fixture_params.insert(t.name.substr(6));
  std::set<std::string> model_params;
  for (ParamEntry& e : params.entries()) {
    model_params.insert(e.name);
    const Shape& shape = e.value.shape();
    const TensorRecord& r = need(fx, "param." + e.name, "F32", dims_of(shape));
    std::memcpy(e.value.f32(), r.bytes.data(), r.bytes.size());
  }
  ASSERT_EQ(model_params, fixture_params) << "parameter set changed: regenerate the fixture";

  Program p(f.graph, f.outputs);
  for (ParamEntry& e : params.entries()) p.bind_param(e.name, e.value.f32());
  for (const char* name : {"tokens", "targets"}) {
    const TensorRecord& r = need(fx, name, "I32", {c.batch, c.context});
    p.write_input(name, r.bytes.data(), r.bytes.size());
  }
  p.run();

  const TensorRecord& loss = need(fx, "loss", "F64", {});
  double worst = relative_error(p.read_f32(f.out.loss).data(), loss);
  std::string worst_name = "loss";
  EXPECT_LE(worst, kTolerance) << "loss";
  const TensorRecord& logits = need(fx, "logits", "F64", {c.batch, c.context, c.vocab});
  const double logits_err = relative_error(p.read_f32(f.out.logits.value()).data(), logits);
  EXPECT_LE(logits_err, kTolerance) << "logits";
  if (logits_err > worst) worst = logits_err, worst_name = "logits";
  const std::vector<ValueId>& ps = f.graph.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string& name = f.graph.node(ps[i]).name;
    const TensorRecord& g = need(fx, "grad." + name, "F64", dims_of(f.graph.node(ps[i]).shape));
    const double err = relative_error(p.read_f32(f.grads[i]).data(), g);
    EXPECT_LE(err, kTolerance) << "gradient of " << name;
    if (err > worst) worst = err, worst_name = "gradient of " + name;
  }
  std::printf("worst relative error (%s attention): %.3g (%s)\n", c.attention.c_str(), worst,
              worst_name.c_str());
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenGptAttention, ::testing::Values("fused", "unfused"),
                         [](const auto& info) { return info.param; });

// Writes Tessel's initial parameters (seed 1) for the golden config to
// $TESSEL_GOLDEN_EXPORT, for scripts/make_golden.py. Run with
// --gtest_also_run_disabled_tests --gtest_filter=GoldenGpt.DISABLED_ExportInitialParameters.
TEST(GoldenGpt, DISABLED_ExportInitialParameters) {
  const char* path = std::getenv("TESSEL_GOLDEN_EXPORT");
  ASSERT_NE(path, nullptr) << "set TESSEL_GOLDEN_EXPORT to the output path";
  Forward f = build(golden_config());
  ParamStore params(f.graph, /*seed=*/1);
  std::vector<TensorView> views;
  for (ParamEntry& e : params.entries())
    views.push_back({e.name, "F32", dims_of(e.value.shape()), e.value.f32(),
                     static_cast<size_t>(e.value.shape().numel()) * sizeof(float)});
  write_safetensors(path, views, {{"seed", "1"}});
}

}  // namespace
}  // namespace tessel
