// Accumulated outputs (CompileOptions::accumulated_outputs): a pipeline
// stage's parameter gradients are added into caller buffers as they are
// computed, so a micro-batch in flight holds none of them: the sums are
// bitwise the outputs of a program that keeps them, the per-instance arena
// shrinks, and reading such an output is refused.
#include <gtest/gtest.h>

#include <cstring>

#include "common/error_of.h"
#include "common/tiny_gpt_training.h"
#include "tessel/runtime/program.h"
#include "tessel/train/param_store.h"

namespace tessel {
namespace {

void feed_microbatch(Program& p, int seed) {
  for (const char* name : {"tokens", "targets"}) {
    std::vector<int32_t> ids(2 * 16);
    for (int i = 0; i < 2 * 16; ++i) ids[i] = (i * 5 + seed * 11) % 256;
    p.write_input(name, ids.data(), ids.size() * sizeof(int32_t));
  }
}

TEST(AccumulatedOutputs, AddUpBitwiseAsKeptOutputsAndLeaveTheArena) {
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, cpu_backend(), 3);
  CompileOptions kept_options;
  kept_options.phase_starts = {t.backward_start};
  kept_options.separate_phase_local = true;
  CompileOptions options = kept_options;
  const std::vector<ValueId> grads(t.outputs.begin() + 1, t.outputs.end());
  options.accumulated_outputs = grads;
  Program kept(t.graph, t.outputs, kept_options);
  Program added(t.graph, t.outputs, options);
  for (Program* p : {&kept, &added})
    for (ParamEntry& e : params.entries()) p->bind_param(e.name, e.value.device_f32());
  std::vector<std::vector<float>> sums(grads.size()), want(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    const size_t n = t.graph.node(grads[i]).shape.numel();
    sums[i].assign(n, 0.0f);
    want[i].assign(n, 0.0f);
    added.bind_accumulator(grads[i], sums[i].data());
  }
  for (int microbatch = 1; microbatch <= 3; ++microbatch) {
    feed_microbatch(kept, microbatch);
    kept.run_phase(0);
    kept.run_phase(1);
    for (size_t i = 0; i < grads.size(); ++i) {
      const std::vector<float> g = kept.read_f32(grads[i]);
      for (size_t k = 0; k < g.size(); ++k) want[i][k] += g[k];
    }
    feed_microbatch(added, microbatch);
    added.run_phase(0);
    added.run_phase(1);
  }
  for (size_t i = 0; i < grads.size(); ++i)
    EXPECT_EQ(std::memcmp(sums[i].data(), want[i].data(), want[i].size() * 4), 0)
        << t.graph.node(grads[i]).name;
  // The gradients no longer cross phases: they left the per-instance arena.
  EXPECT_LT(added.arena_bytes(), kept.arena_bytes());
  EXPECT_NE(error_of([&] { added.read_f32(grads[0]); }).find("read the accumulator"),
            std::string::npos);
  // The loss is still an ordinary output.
  EXPECT_EQ(added.read_scalar(t.outputs[0]), kept.read_scalar(t.outputs[0]));
}

TEST(AccumulatedOutputs, RefuseToRunUnbound) {
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, cpu_backend(), 3);
  CompileOptions options;
  options.accumulated_outputs = {t.outputs[1]};
  Program p(t.graph, t.outputs, options);
  for (ParamEntry& e : params.entries()) p.bind_param(e.name, e.value.device_f32());
  feed_microbatch(p, 1);
  EXPECT_NE(error_of([&] { p.run(); }).find("is not bound to a buffer"), std::string::npos);
  EXPECT_NE(error_of([&] {
              p.bind_accumulator(t.outputs[0], nullptr);
            }).find("is not an accumulated output"),
            std::string::npos);
}

// The breakdown's parts are the bytes live at the peak: they add up to no
// more than the plan, and the arena's largest value is among them.
TEST(AccumulatedOutputs, MemoryBreakdownAddsUpToThePlanAtMost) {
  TinyGptTraining t = tiny_gpt_training();
  Program p(t.graph, t.outputs);
  const Program::MemoryBreakdown b = p.memory_breakdown(/*phase_local=*/false);
  const size_t parts = b.values + b.bf16_copies + b.staging + b.scratch + b.buckets;
  EXPECT_GT(parts, 0u);
  EXPECT_LE(parts, b.planned);
  EXPECT_EQ(b.planned, p.arena_bytes());
  ASSERT_GE(b.peak_instruction, 0);
  ASSERT_FALSE(b.largest.empty());
  for (size_t i = 1; i < b.largest.size(); ++i)
    EXPECT_GE(b.largest[i - 1].second, b.largest[i].second);
  EXPECT_EQ(p.memory_breakdown(/*phase_local=*/true).planned, 0u);  // one phase: no shared region
}

}  // namespace
}  // namespace tessel
