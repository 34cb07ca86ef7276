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
    std::vector<int32_t> ids(2 * 16);
    for (int i = 0; i < 2 * 16; ++i) ids[i] = (i * 7 + seed * 13) % 256;
    p.write_input(name, ids.data(), ids.size() * sizeof(int32_t));
  }
}

std::vector<float> results(Program& p, const TinyGptTraining& t) {
  std::vector<float> r;
  for (ValueId v : t.outputs) {
    const std::vector<float> x = p.read_f32(v);
    r.insert(r.end(), x.begin(), x.end());
  }
  return r;
}

// One whole run of `p` on micro-batch `seed`.
std::vector<float> run_alone(Program& p, const TinyGptTraining& t, int seed) {
  feed(p, seed);
  p.run();
  return results(p, t);
}

// Two micro-batches (seeds 1 and 2) on `a` and `b`, interleaved like a
// pipeline (F, F, B, B; `b_first`: b's forward first), give bitwise what
// `alone` gives for each run on its own.
void expect_interleaved_matches_alone(Program& a, Program& b, Program& alone,
                                      const TinyGptTraining& t, bool b_first,
                                      const std::string& what) {
  std::vector<float> want_a = run_alone(alone, t, 1);
  std::vector<float> want_b = run_alone(alone, t, 2);
  feed(a, 1);
  feed(b, 2);
  (b_first ? b : a).run_phase(0);
  (b_first ? a : b).run_phase(0);
  a.run_phase(1);
  std::vector<float> got_a = results(a, t);
  b.run_phase(1);
  std::vector<float> got_b = results(b, t);
  ASSERT_EQ(got_a.size(), want_a.size()) << what;
  EXPECT_EQ(std::memcmp(got_a.data(), want_a.data(), got_a.size() * 4), 0) << what;
  EXPECT_EQ(std::memcmp(got_b.data(), want_b.data(), got_b.size() * 4), 0) << what;
}

TEST(ProgramPhases, InstancesSharingPhaseLocalMemoryMatchSeparateRuns) {
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, cpu_backend(), 7);
  CompileOptions options;
  options.phase_starts = {t.backward_start};
  options.separate_phase_local = true;
  Program a(t.graph, t.outputs, options);
  options.shared_region = a.shared_region();
  Program b(t.graph, t.outputs, options);
  Program alone(t.graph, t.outputs);  // one arena, one phase
  for (Program* p : {&a, &b, &alone})
    for (ParamEntry& e : params.entries()) p->bind_param(e.name, e.value.device_f32());
  ASSERT_EQ(a.phase_count(), 2);
  EXPECT_GT(a.phase_local_bytes(), 0u);
  ASSERT_NE(a.shared_region(), nullptr);
  EXPECT_EQ(a.shared_region(), b.shared_region());
  EXPECT_LT(a.arena_bytes(), alone.arena_bytes());

  expect_interleaved_matches_alone(a, b, alone, t, /*b_first=*/false, "f32");
}

// bf16 pipeline instances share one bf16 copy of each weight, rounded by
// the first einsum that reads it after the weights changed, by whichever
// instance runs first: interleaved, they match a one-phase program (which
// rounds each weight once per run) bitwise, before and after the weights
// change; the copies sit after the phase-local buffers in the one region.
TEST(ProgramPhases, Bf16InstancesShareWeightCopiesRoundedOncePerChange) {
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, cpu_backend(), 7);
  CompileOptions options;
  options.bf16 = true;
  options.phase_starts = {t.backward_start};
  options.separate_phase_local = true;
  Program per_phase(t.graph, t.outputs, options);  // a copy per phase, in the plan
  options.share_weight_copies = true;
  Program a(t.graph, t.outputs, options);
  options.shared_region = a.shared_region();
  Program b(t.graph, t.outputs, options);
  CompileOptions one_phase;
  one_phase.bf16 = true;
  Program alone(t.graph, t.outputs, one_phase);
  for (Program* p : {&a, &b, &alone, &per_phase})
    for (ParamEntry& e : params.entries()) p->bind_param(e.name, e.value.device_f32());
  ASSERT_EQ(a.shared_region(), b.shared_region());
  for (int change = 0; change < 2; ++change) {
    if (change == 1) {
      for (ParamEntry& e : params.entries()) {
        std::vector<float> w = e.value.to_host();
        for (float& x : w) x = x * 1.5f + 0.01f;
        e.value.write(w.data());
      }
      a.weights_changed();  // b shares its copies
    }
    const std::string what = "bf16, weights changed " + std::to_string(change) + " times";
    // b rounds the weights for both.
    expect_interleaved_matches_alone(a, b, alone, t, /*b_first=*/true, what);
    std::vector<float> want = run_alone(alone, t, 1);
    std::vector<float> got_per_phase = run_alone(per_phase, t, 1);
    EXPECT_EQ(std::memcmp(got_per_phase.data(), want.data(), want.size() * 4), 0) << what;
  }
  // Without weights_changed() the copies are what they were: stale.
  for (ParamEntry& e : params.entries()) {
    std::vector<float> w = e.value.to_host();
    for (float& x : w) x *= 0.5f;
    e.value.write(w.data());
  }
  std::vector<float> fresh = run_alone(alone, t, 1);
  std::vector<float> stale = run_alone(a, t, 1);
  EXPECT_NE(std::memcmp(stale.data(), fresh.data(), stale.size() * 4), 0);
}

}  // namespace
}  // namespace tessel
