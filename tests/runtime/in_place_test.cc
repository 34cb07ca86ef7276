// Kernels that write over a dying input (runtime/program_in_place.cc): the
// cross-entropy gradient takes the logits' buffer when nothing reads the
// logits after it, which shrinks the arena and changes no bit of the loss
// or the gradients; logits kept as an output keep a buffer of their own.
// The same holds for every kind the op table marks kOwnOrFirstInput.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>

#include "common/tiny_gpt_training.h"
#include "tessel/ir/op_table.h"
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

// The loss and every gradient of `a` and `b` (run), bit for bit.
void expect_same_loss_and_gradients(const TinyGptTraining& t, Program& a, Program& b) {
  EXPECT_EQ(a.read_scalar(t.outputs[0]), b.read_scalar(t.outputs[0]));
  for (size_t i = 1; i < t.outputs.size(); ++i) {
    const std::vector<float> x = a.read_f32(t.outputs[i]);
    const std::vector<float> y = b.read_f32(t.outputs[i]);
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0)
        << t.graph.node(t.outputs[i]).name;
  }
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
  expect_same_loss_and_gradients(t, in_place, kept);
}

// Every kind the op table lets write over its first input, in the unfused
// GPT (the softmax and GELU gradients besides the loss's fire there): each one
// that does leaves the loss and every gradient bitwise as a program where
// all those inputs are kept (outputs, so never written over).
TEST(InPlace, EveryMarkedKindWritingOverItsInputChangesNoBit) {
  TinyGptTraining t = tiny_gpt_training("unfused");
  ParamStore params(t.graph, cpu_backend(), 5);
  std::vector<ValueId> kept_outputs = t.outputs, marked;
  for (ValueId id = 0; id < t.graph.size(); ++id)
    if (op_info(t.graph.node(id).kind).output == OutputBuffer::kOwnOrFirstInput) {
      marked.push_back(id);
      kept_outputs.push_back(t.graph.node(id).inputs[0]);
    }
  Program in_place(t.graph, t.outputs);
  Program kept(t.graph, kept_outputs);
  std::set<OpKind> wrote_over;
  for (ValueId id : marked) {
    const ValueId input = t.graph.node(id).inputs[0];
    if (in_place.device_ptr(id) == in_place.device_ptr(input))
      wrote_over.insert(t.graph.node(id).kind);
    EXPECT_NE(kept.device_ptr(id), kept.device_ptr(input)) << t.graph.node(id).name;
  }
  for (OpKind kind : wrote_over) std::printf("wrote over its input: %s\n", op_name(kind));
  for (OpKind kind : {OpKind::kCrossEntropyGrad, OpKind::kSoftmaxGrad, OpKind::kBiasGeluGrad})
    EXPECT_TRUE(wrote_over.count(kind)) << op_name(kind) << " never wrote over its input";
  EXPECT_LT(in_place.arena_bytes(), kept.arena_bytes());
  run_once(in_place, params);
  run_once(kept, params);
  expect_same_loss_and_gradients(t, in_place, kept);
}

}  // namespace
}  // namespace tessel
