// Dropout masks keyed by (seed, label, step, global row, element): a program
// draws a new mask each step without recompiling, a micro-batch's rows draw
// what the same rows of the whole batch draw, and so does a rank's shard
// (shard offsets along any dim, the row dim anywhere in the shape).
#include <gtest/gtest.h>

#include <vector>

#include "tessel/ir/builder.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

constexpr float kP = 0.5f;
constexpr uint64_t kSeed = 11;

// y = dropout(x) with x of `shape` filled with ones (so y is 0 or 2).
struct DropoutProgram {
  Graph graph;
  ValueId y = -1;
  std::unique_ptr<Program> program;

  explicit DropoutProgram(const Shape& shape, Attrs shard = {}) {
    GraphBuilder b(graph);
    ValueId x = b.input("x", shape, DType::kF32);
    if (shard.offsets.empty()) {
      y = b.dropout(x, kP, kSeed, "drop");
    } else {  // a rank's shard: global shape and offsets, as the lowering sets them
      shard.scalar = kP;
      shard.seed = kSeed;
      shard.key = "drop";
      shard.dim = "batch";
      y = b.op(OpKind::kDropout, {x}, std::move(shard), "drop");
    }
    program = std::make_unique<Program>(graph, std::vector<ValueId>{y});
    const std::vector<float> ones(shape.numel(), 1.0f);
    program->write(graph.inputs()[0], ones.data());
  }
  std::vector<float> run(int64_t step, int64_t microbatch = 0) {
    program->set_step(step);
    program->set_microbatch(microbatch);
    program->run();
    return program->read_f32(y);
  }
};

// Element (b, s, e) of a [batch, seq, embed] row-major vector.
float at(const std::vector<float>& v, const Shape& shape, int64_t b, int64_t s, int64_t e) {
  return v[(b * shape[1].size + s) * shape[2].size + e];
}

TEST(DropoutPosition, MaskChangesEveryStepAndRepeatsForTheSameStep) {
  DropoutProgram d(Shape{{"batch", 4}, {"seq", 8}, {"embed", 16}});
  const std::vector<float> s0 = d.run(0), s1 = d.run(1), again = d.run(0);
  EXPECT_EQ(s0, again);
  int64_t differ = 0, kept = 0;
  for (size_t i = 0; i < s0.size(); ++i) {
    differ += s0[i] != s1[i];
    kept += s0[i] != 0.0f;
  }
  // Two independent masks at p = 0.5 disagree on about half of 512 elements.
  EXPECT_GT(differ, 180);
  EXPECT_LT(differ, 330);
  EXPECT_GT(kept, 180);
  EXPECT_LT(kept, 330);
}

TEST(DropoutPosition, MicroBatchRowsDrawWhatTheWholeBatchDraws) {
  const Shape whole{{"batch", 6}, {"seq", 3}, {"embed", 5}};
  const Shape micro{{"batch", 2}, {"seq", 3}, {"embed", 5}};
  DropoutProgram full(whole), part(micro);
  for (int64_t step : {0, 7}) {
    const std::vector<float> want = full.run(step);
    for (int64_t mb = 0; mb < 3; ++mb) {
      const std::vector<float> got = part.run(step, mb);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t s = 0; s < 3; ++s)
          for (int64_t e = 0; e < 5; ++e)
            EXPECT_EQ(at(got, micro, b, s, e), at(want, whole, mb * 2 + b, s, e))
                << "step " << step << " micro-batch " << mb << " row " << b;
    }
  }
}

// The row dim need not lead: [seq, batch, embed] micro-batches agree too.
TEST(DropoutPosition, RowDimInTheMiddle) {
  const Shape whole{{"seq", 3}, {"batch", 4}, {"embed", 5}};
  const Shape micro{{"seq", 3}, {"batch", 2}, {"embed", 5}};
  DropoutProgram full(whole), part(micro);
  const std::vector<float> want = full.run(3);
  const std::vector<float> got = part.run(3, 1);
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t e = 0; e < 5; ++e)
        EXPECT_EQ(at(got, micro, s, b, e), at(want, whole, s, 2 + b, e)) << s << " " << b;
}

// A shard of a micro-batch (rows 1 of 2, embed 3..5 of 6) of micro-batch 1
// draws global rows 3, and the embed elements by their global index.
TEST(DropoutPosition, ShardOfAMicroBatchUsesGlobalRowsAndElements) {
  const Shape whole{{"batch", 4}, {"seq", 3}, {"embed", 6}};
  const Shape local{{"batch", 1}, {"seq", 3}, {"embed", 3}};
  Attrs shard;
  shard.shape = Shape{{"batch", 2}, {"seq", 3}, {"embed", 6}};  // the micro-batch, global
  shard.offsets = {1, 0, 3};
  DropoutProgram full(whole), part(local, shard);
  const std::vector<float> want = full.run(5);
  const std::vector<float> got = part.run(5, 1);
  for (int64_t s = 0; s < 3; ++s)
    for (int64_t e = 0; e < 3; ++e)
      EXPECT_EQ(at(got, local, 0, s, e), at(want, whole, 3, s, 3 + e)) << s << " " << e;
}

}  // namespace
}  // namespace tessel
