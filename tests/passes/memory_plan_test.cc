// The static memory plan: no two buffers that are live at the same time
// overlap, reuse actually happens, and the planned peak is what a program
// allocates.
#include "tessel/passes/memory_plan.h"

#include <gtest/gtest.h>

#include "common/tiny_gpt.h"
#include "tessel/base/philox.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/config.h"
#include "tessel/runtime/program.h"
#include "tessel/tensor/tensor.h"

namespace tessel {
namespace {

TEST(MemoryPlan, RandomRequestsNeverOverlapWhileLive) {
  PhiloxStream s(3, "plan");
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferRequest> reqs;
    for (int i = 0; i < 60; ++i) {
      int first = static_cast<int>(s.below(50, trial * 1000 + i, 0));
      int len = static_cast<int>(s.below(20, trial * 1000 + i, 1));
      size_t bytes = 1 + s.below(5000, trial * 1000 + i, 2);
      reqs.push_back({bytes, first, first + len});
    }
    MemoryPlan plan = plan_memory(reqs);
    EXPECT_EQ(find_plan_conflict(reqs, plan), "") << "trial " << trial;
  }
}

TEST(MemoryPlan, DisjointLifetimesShareMemory) {
  std::vector<BufferRequest> reqs = {{1000, 0, 1}, {1000, 2, 3}, {1000, 4, 5}};
  MemoryPlan plan = plan_memory(reqs);
  EXPECT_EQ(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.peak_bytes, round_up(1000));
}

TEST(MemoryPlan, ConflictCheckerCatchesOverlap) {
  std::vector<BufferRequest> reqs = {{1000, 0, 2}, {1000, 1, 3}};
  MemoryPlan bad{{0, 512}, 2048};
  EXPECT_NE(find_plan_conflict(reqs, bad), "");
}

TEST(MemoryPlan, GptTrainingProgramPlanIsValidAndReusesMemory) {
  TrainConfig c = tiny_gpt_config(2, 4);
  TrainingGraph t = build_training_graph(c, c.batch);
  std::vector<ValueId> outputs = {t.outputs.loss};
  outputs.insert(outputs.end(), t.grads.begin(), t.grads.end());
  Program program(t.graph, outputs);
  EXPECT_EQ(find_plan_conflict(program.buffer_requests(), program.memory_plan()), "");
  size_t total = 0;
  for (const BufferRequest& r : program.buffer_requests()) total += round_up(r.bytes);
  EXPECT_GT(program.arena_bytes(), 0u);
  EXPECT_LT(program.arena_bytes(), total)
      << "liveness-based reuse should beat one buffer per value";
}

// Tensor storage is counted process-wide: live bytes rise and fall with the
// buffers (moves transfer, never double count), and the high-water mark
// keeps the most ever live at once.
TEST(AllocationStats, CountLiveBytesAndTheirHighWaterMark) {
  const int64_t base = allocation_stats().live_bytes;
  reset_allocation_peak();
  {
    AlignedBuffer a(1000);
    Tensor t(Shape{{"x", 256}}, DType::kF32);
    EXPECT_EQ(allocation_stats().live_bytes, base + 1000 + 1024);
    AlignedBuffer moved = std::move(a);
    EXPECT_EQ(allocation_stats().live_bytes, base + 2024);
    // The new buffer exists before the old one's 1000 bytes are freed.
    moved = AlignedBuffer(10);
    EXPECT_EQ(allocation_stats().live_bytes, base + 1034);
  }
  EXPECT_EQ(allocation_stats().live_bytes, base);
  EXPECT_EQ(allocation_stats().peak_bytes, base + 2034);
  reset_allocation_peak();
  EXPECT_EQ(allocation_stats().peak_bytes, base);
}

}  // namespace
}  // namespace tessel
