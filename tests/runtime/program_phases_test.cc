// Programs run in phases (forward, backward) and pipeline instances sharing
// one region for their within-phase temporaries: interleaving two
// instances' phases gives bitwise the results of running each alone, and
// only values that cross phases stay in each instance's own arena.
#include <gtest/gtest.h>

#include <cstring>

#include "common/tiny_gpt_training.h"
#include "tessel/autodiff/backward.h"
#include "tessel/runtime/program.h"
#include "tessel/train/param_store.h"
#include "tessel/train/task.h"

namespace tessel {
namespace {

void feed(Program& p, int seed) {
  for (const char* name : {"tokens", "targets"}) {
    int32_t* ids = static_cast<int32_t*>(p.input(name));
    for (int i = 0; i < 2 * 16; ++i) ids[i] = (i * 7 + seed * 13) % 256;
  }
}

std::vector<float> results(Program& p, const TinyGptTraining& t) {
  std::vector<float> r;
  for (ValueId v : t.outputs) {
    const float* x = p.f32(v);
    r.insert(r.end(), x, x + t.graph.node(v).shape.numel());
  }
  return r;
}

TEST(ProgramPhases, InstancesSharingPhaseLocalMemoryMatchSeparateRuns) {
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, 7);
  CompileOptions options;
  options.phase_starts = {t.backward_start};
  options.separate_phase_local = true;
  Program a(t.graph, t.outputs, options);
  options.phase_local_memory = a.phase_local_memory();
  Program b(t.graph, t.outputs, options);
  Program alone(t.graph, t.outputs);  // one arena, one phase
  for (Program* p : {&a, &b, &alone})
    for (ParamEntry& e : params.entries()) p->bind_param(e.name, e.value.f32());
  ASSERT_EQ(a.phase_count(), 2);
  EXPECT_GT(a.phase_local_bytes(), 0u);
  EXPECT_EQ(a.phase_local_memory(), b.phase_local_memory());
  EXPECT_LT(a.arena_bytes(), alone.arena_bytes());

  // Reference: each micro-batch alone.
  feed(alone, 1);
  alone.run();
  std::vector<float> want_a = results(alone, t);
  feed(alone, 2);
  alone.run();
  std::vector<float> want_b = results(alone, t);
  // Interleaved like a pipeline: F(a), F(b), B(a), B(b).
  feed(a, 1);
  feed(b, 2);
  a.run_phase(0);
  b.run_phase(0);
  a.run_phase(1);
  std::vector<float> got_a = results(a, t);
  b.run_phase(1);
  std::vector<float> got_b = results(b, t);
  ASSERT_EQ(got_a.size(), want_a.size());
  EXPECT_EQ(std::memcmp(got_a.data(), want_a.data(), got_a.size() * 4), 0);
  EXPECT_EQ(std::memcmp(got_b.data(), want_b.data(), got_b.size() * 4), 0);
}

}  // namespace
}  // namespace tessel
