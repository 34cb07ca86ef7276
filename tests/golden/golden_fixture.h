// What the golden tests share: a model's forward + backward in f32 checked
// against a committed PyTorch float64 fixture.
//
// A fixture (written by scripts/make_golden*.py) holds a batch ("tokens",
// "targets", I32), every parameter (F32, "param.<name>"), and in F64 the
// logits, the loss and every parameter's gradient ("grad.<name>"); its
// metadata holds the config. check_against_fixture builds the model from the
// config, binds the fixture's parameters, runs once and compares each tensor
// with the norm max|tessel - torch| / max|torch|, which must be at most the
// tolerance. The parameter set must match the fixture's exactly (a new or
// renamed parameter fails: regenerate the fixture).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessel/autodiff/backward.h"
#include "tessel/compile/model_registry.h"
#include "tessel/runtime/program.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/param_store.h"

namespace tessel::golden {

struct Forward {
  Graph graph;
  TaskGraph out;
  std::vector<ValueId> grads;  // aligned with graph.params()
  std::vector<ValueId> outputs;
};

inline Forward build(const TrainConfig& c) {
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

inline std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> d;
  for (int i = 0; i < s.rank(); ++i) d.push_back(s[i].size);
  return d;
}

inline const TensorRecord& need(const SafetensorsFile& f, const std::string& name,
                                const std::string& dtype, const std::vector<int64_t>& shape) {
  const TensorRecord* r = f.find(name);
  if (r == nullptr) throw std::runtime_error("golden fixture has no tensor '" + name + "'");
  if (r->dtype != dtype || r->shape != shape)
    throw std::runtime_error("golden fixture tensor '" + name + "' has the wrong dtype or shape");
  return *r;
}

// max|got - want| / max|want| over one tensor.
inline double relative_error(const float* got, const TensorRecord& want) {
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

// Every key the fixture's metadata must hold, with the value the config has.
inline void expect_metadata(const SafetensorsFile& fx,
                            const std::map<std::string, std::string>& want) {
  for (const auto& [key, value] : want) {
    ASSERT_TRUE(fx.metadata.count(key)) << "fixture metadata lacks " << key;
    EXPECT_EQ(fx.metadata.at(key), value) << key;
  }
}

// Runs the model of `c` on the fixture's batch and parameters; every
// compared tensor within `tolerance`. Returns the worst relative error.
inline double check_against_fixture(const TrainConfig& c, const SafetensorsFile& fx,
                                    double tolerance) {
  Forward f = build(c);
  ParamStore params(f.graph, cpu_backend());
  std::set<std::string> fixture_params, model_params;
  for (const TensorRecord& t : fx.tensors)
    if (t.name.rfind("param.", 0) == 0) fixture_params.insert(t.name.substr(6));
  for (ParamEntry& e : params.entries()) {
    model_params.insert(e.name);
    const TensorRecord& r = need(fx, "param." + e.name, "F32", dims_of(e.value.shape()));
    e.value.write(reinterpret_cast<const float*>(r.bytes.data()));  // need() checked its dims
  }
  EXPECT_EQ(model_params, fixture_params) << "parameter set changed: regenerate the fixture";

  Program p(f.graph, f.outputs);
  for (ParamEntry& e : params.entries()) p.bind_param(e.name, e.value.device_f32());
  for (const char* name : {"tokens", "targets"}) {
    const TensorRecord& r = need(fx, name, "I32", {c.batch, c.context});
    p.write_input(name, r.bytes.data(), r.bytes.size());
  }
  p.run();

  double worst = 0;
  std::string worst_name;
  auto compare = [&](const std::string& what, ValueId value, const TensorRecord& want) {
    const double err = relative_error(p.read_f32(value).data(), want);
    EXPECT_LE(err, tolerance) << what;
    if (err >= worst) worst = err, worst_name = what;
  };
  compare("loss", f.out.loss, need(fx, "loss", "F64", {}));
  compare("logits", f.out.logits.value(), need(fx, "logits", "F64", {c.batch, c.context, c.vocab}));
  const std::vector<ValueId>& ps = f.graph.params();
  for (size_t i = 0; i < ps.size(); ++i) {
    const std::string& name = f.graph.node(ps[i]).name;
    compare("gradient of " + name, f.grads[i],
            need(fx, "grad." + name, "F64", dims_of(f.graph.node(ps[i]).shape)));
  }
  std::printf("worst relative error (%s): %.3g (%s)\n", c.model.c_str(), worst, worst_name.c_str());
  return worst;
}

// Writes the initial parameters (seed 1) of config `c` to `path`, the input
// of the fixture's generator script.
inline void export_initial_parameters(const TrainConfig& c, const std::string& path) {
  Forward f = build(c);
  ParamStore params(f.graph, cpu_backend(), /*seed=*/1);
  std::vector<TensorView> views;
  std::vector<std::vector<float>> values;
  values.reserve(params.entries().size());
  for (ParamEntry& e : params.entries()) {
    values.push_back(e.value.to_host());
    views.push_back({e.name, "F32", dims_of(e.value.shape()), values.back().data(),
                     values.back().size() * sizeof(float)});
  }
  write_safetensors(path, views, {{"seed", "1"}});
}

}  // namespace tessel::golden
