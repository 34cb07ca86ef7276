// Activation offload in one Program (CompileOptions::offload_from,
// runtime/program_offload.cc): the values the backward reads from the
// forward go to pinned host memory in between, so the arena shrinks, the
// host plan holds them (allocated in the backend's pinned space), the
// device plan stays conflict-free, and the loss and every gradient keep
// their bits, on a second run too (each value's pointers return to its
// forward buffer before it is written again).
#include <gtest/gtest.h>

#include <cstring>

#include "common/tiny_gpt_training.h"
#include "tessel/runtime/program.h"
#include "tessel/train/param_store.h"

namespace tessel {
namespace {

void run_once(Program& p, ParamStore& params, int salt) {
  for (ParamEntry& e : params.entries()) p.bind_param(e.name, e.value.device_f32());
  for (ValueId id : p.graph().inputs()) {  // tokens and targets
    std::vector<int32_t> ids(p.graph().node(id).shape.numel());
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<int32_t>((i * 7 + id + salt) % 256);
    p.write_input(p.graph().node(id).name, ids.data(), ids.size() * sizeof(int32_t));
  }
  p.run();
}

void expect_same_loss_and_gradients(const TinyGptTraining& t, Program& a, Program& b) {
  EXPECT_EQ(a.read_scalar(t.outputs[0]), b.read_scalar(t.outputs[0]));
  for (size_t i = 1; i < t.outputs.size(); ++i) {
    const std::vector<float> x = a.read_f32(t.outputs[i]), y = b.read_f32(t.outputs[i]);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0)
        << t.graph.node(t.outputs[i]).name;
  }
}

TEST(OffloadActivations, SameBitsInASmallerArenaWithTheValuesInPinnedHostMemory) {
  for (const char* attention : {"fused", "unfused"}) {
    SCOPED_TRACE(attention);
    TinyGptTraining t = tiny_gpt_training(attention);
    ParamStore params(t.graph, cpu_backend(), 3);
    Program stored(t.graph, t.outputs);
    CompileOptions options;
    options.offload_from = t.backward_start;
    const auto pinned = [] {
      return cpu_backend().space_stats(MemorySpace::kPinnedHost).live_bytes;
    };
    const int64_t before = pinned();
    Program offloaded(t.graph, t.outputs, options);
    EXPECT_EQ(pinned() - before, static_cast<int64_t>(offloaded.offload_bytes()));
    EXPECT_GT(offloaded.offloaded_values(), 0);
    EXPECT_EQ(stored.offloaded_values(), 0);
    EXPECT_LT(offloaded.arena_bytes(), stored.arena_bytes());
    EXPECT_EQ(find_plan_conflict(offloaded.buffer_requests(), offloaded.memory_plan()), "");
    for (int salt : {0, 1}) {
      run_once(stored, params, salt);
      run_once(offloaded, params, salt);
      expect_same_loss_and_gradients(t, offloaded, stored);
    }
  }
}

}  // namespace
}  // namespace tessel
