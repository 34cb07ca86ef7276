// Kernels that write over a dying input (runtime/program_in_place.cc): the
// cross-entropy gradient takes the logits' buffer when nothing reads the
// logits after it, which shrinks the arena and changes no bit of the loss
// or the gradients; logits kept as an output keep a buffer of their own.
#include <gtest/gtest.h>

#include <cstring>

#include "common/tiny_gpt_training.h"
#include "tessel/runtime/program.h"
#include "tessel/train/param_store.h"

namespace tessel {
namespace {

ValueId find_kind(const Graph& g, OpKind kind) {
  for (ValueId id = 0; id < g.size(); ++id)
    if (g.node(id).kind == kind) return id;
  ADD_FAILURE() << "no " << op_name(kind) << " in the graph";
  return -1;
}

void run_once(Program& p, ParamStore& params) {
  for (ParamEntry& e : params.entries()) p.bind_param(e.name, e.value.device_f32());
  for (ValueId id : p.graph().inputs()) {  // tokens and targets
    std::vector<int32_t> ids(p.graph().node(id).shape.numel());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7 + id) % 256);
    p.write_input(p.graph().node(id).name, ids.data(), ids.size() * sizeof(int32_t));
  }
  p.run();
}

TEST(InPlace, CrossEntropyGradientWritesOverTheLogits) {
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, cpu_backend(), 3);
  const ValueId grad = find_kind(t.graph, OpKind::kCrossEntropyGrad);
  const ValueId logits = t.graph.node(grad).inputs[0];
  Program in_place(t.graph, t.outputs);
  std::vector<ValueId> with_logits = t.outputs;
  with_logits.push_back(logits);
  Program kept(t.graph, with_logits);
  EXPECT_EQ(in_place.device_ptr(grad), in_place.device_ptr(logits));
  EXPECT_NE(kept.device_ptr(grad), kept.device_ptr(logits));
  EXPECT_LT(in_place.arena_bytes(), kept.arena_bytes());
  run_once(in_place, params);
  run_once(kept, params);
  EXPECT_EQ(in_place.read_scalar(t.outputs[0]), kept.read_scalar(t.outputs[0]));
  for (size_t i = 1; i < t.outputs.size(); ++i) {
    const std::vector<float> a = in_place.read_f32(t.outputs[i]);
    const std::vector<float> b = kept.read_f32(t.outputs[i]);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << t.graph.node(t.outputs[i]).name;
  }
}

}  // namespace
}  // namespace tessel
