// What a Program reads from parameter storage (InstructionInfo::
// param_read_bytes), which the cost model prices at the host link when
// offload keeps the weights in host memory. On the MLP (fc1, bias, relu,
// fc2, bias, cross-entropy) and its backward: in f32 the forward reads
// every parameter once and the backward reads w2 again (the input
// gradient of fc2; the images need none); in bf16 each weight is read
// once, to round its bf16 copy, and the biases as in f32.
#include <gtest/gtest.h>

#include "tessel/autodiff/backward.h"
#include "tessel/ir/builder.h"
#include "tessel/models/mlp.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

size_t param_reads(bool bf16) {
  Graph g;
  GraphBuilder b(g);
  const MlpConfig c{.pixels = 12, .hidden = 8, .classes = 4};
  const TaskGraph task = build_mlp(b, c, 6);
  std::map<ValueId, ValueId> grads = build_backward(b, task.loss, g.params());
  std::vector<ValueId> outputs = {task.loss};
  for (ValueId p : g.params()) outputs.push_back(grads.at(p));
  CompileOptions options;
  options.plan_only = true;
  options.bf16 = bf16;
  const Program program(g, outputs, options);
  size_t bytes = 0;
  for (const Program::InstructionInfo& ins : program.instruction_info())
    bytes += ins.param_read_bytes;
  EXPECT_EQ(program.shared_copy_read_bytes(), 0u);  // no shared weight copies in one program
  return bytes;
}

TEST(ParamReads, F32ReadsEachUseBf16RoundsEachWeightOnce) {
  const size_t w1 = 12 * 8, b1 = 8, w2 = 8 * 4, b2 = 4;
  EXPECT_EQ(param_reads(false), 4 * (w1 + b1 + w2 + b2 + w2));
  EXPECT_EQ(param_reads(true), 4 * (w1 + b1 + w2 + b2));
}

}  // namespace
}  // namespace tessel
