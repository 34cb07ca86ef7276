// Tuples (ir/tuple.h): a node with several outputs, read through tuple_get
// views, through every layer that handles values: the graph and its shape
// rules, autodiff, the program's buffers and memory plan, and the lowering
// to a rank's local graph. The fused attention op is the tuple op used.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error_of.h"
#include "tessel/autodiff/backward.h"
#include "tessel/ir/attrs.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/lower.h"

namespace tessel {
namespace {

const Dim kBatch{"batch", 2}, kSeq{"seq", 5}, kKseq{"kseq", 5}, kHeads{"heads", 4},
    kHead{"head", 3};

struct Qkv {
  ValueId q, k, v;
};

Qkv qkv(GraphBuilder& b) {
  return {b.param("q", Shape{kBatch, kSeq, kHeads, kHead}),
          b.param("k", Shape{kBatch, kKseq, kHeads, kHead}),
          b.param("v", Shape{kBatch, kKseq, kHeads, kHead})};
}

TEST(Tuple, ElementsHaveTheirOwnShapesAtAlignedOffsets) {
  Graph g;
  GraphBuilder b(g);
  const Qkv in = qkv(b);
  const auto att = b.attention(in.q, in.k, in.v, "seq", "kseq", "head", true, 0.5f);
  const Node& tuple = g.node(att.tuple);
  ASSERT_TRUE(is_tuple(tuple));
  ASSERT_EQ(tuple.elements.size(), 2u);
  EXPECT_EQ(g.node(att.out).shape, (Shape{kBatch, kSeq, kHeads, kHead}));
  EXPECT_EQ(g.node(att.lse).shape, (Shape{kBatch, kSeq, kHeads}));
  EXPECT_EQ(tuple.elements[0].offset, 0);
  // 120 floats = 480 bytes, rounded up to 512: the lse starts there.
  EXPECT_EQ(tuple.elements[1].offset, 512);
  EXPECT_EQ(tuple.shape, (Shape{{kTupleDim, (512 + 192) / 4}}));
  EXPECT_FALSE(is_tuple(g.node(att.out)));
  EXPECT_NE(
      g.to_string().find("-> (f32(batch=2, seq=5, heads=4, head=3), f32(batch=2, seq=5, heads=4))"),
      std::string::npos)
      << g.to_string();
}

TEST(Tuple, OnlyTupleGetReadsATupleAndItsIndexIsChecked) {
  Graph g;
  GraphBuilder b(g);
  const Qkv in = qkv(b);
  const auto att = b.attention(in.q, in.k, in.v, "seq", "kseq", "head", false, 0.5f, "att");
  std::string e = error_of([&] { b.scale(att.tuple, 2.0f, "twice"); });
  EXPECT_NE(e.find("scale 'twice': input %"), std::string::npos) << e;
  EXPECT_NE(e.find("is a tuple of 2 values; read one with tuple_get"), std::string::npos) << e;
  e = error_of([&] { b.tuple_get(att.tuple, 2, "third"); });
  EXPECT_NE(e.find("tuple_get 'third': element 2 of a tuple of 2"), std::string::npos) << e;
  e = error_of([&] { b.tuple_get(in.q, 0, "not_a_tuple"); });
  EXPECT_NE(e.find("is not a tuple"), std::string::npos) << e;
}

TEST(Tuple, AttentionShapeErrorsNameTheDims) {
  Graph g;
  GraphBuilder b(g);
  const Qkv in = qkv(b);
  const ValueId short_k = b.param("k2", Shape{kBatch, {"kseq", 4}, kHeads, kHead});
  std::string e = error_of(
      [&] { b.attention(in.q, short_k, short_k, "seq", "kseq", "head", true, 1.0f, "att"); });
  EXPECT_NE(e.find("attention 'att': a causal mask needs query dim seq=5 and key dim kseq=4"),
            std::string::npos)
      << e;
  e = error_of([&] { b.attention(in.q, in.q, in.v, "seq", "kseq", "head", true, 1.0f, "att"); });
  EXPECT_NE(e.find("key dim 'kseq' is not in"), std::string::npos) << e;
  const ValueId wide = b.param("w", Shape{kBatch, kSeq, kHeads, {"head", 129}});
  const ValueId wide_k = b.param("wk", Shape{kBatch, kKseq, kHeads, {"head", 129}});
  e = error_of([&] { b.attention(wide, wide_k, wide_k, "seq", "kseq", "head", true, 1.0f); });
  EXPECT_NE(e.find("head dim head=129 exceeds the kernels' limit of 128"), std::string::npos) << e;
}

// loss = sum(out) + sum(out * 2): two readers of one element, summed; the
// gradient op is one tuple, (dq, dk, dv), read through three views.
TEST(Tuple, AutodiffSumsAnElementsGradientsAndYieldsATupleOfGradients) {
  Graph g;
  GraphBuilder b(g);
  const Qkv in = qkv(b);
  const auto att = b.attention(in.q, in.k, in.v, "seq", "kseq", "head", true, 0.5f, "att");
  const std::vector<std::string> all = {"batch", "seq", "heads", "head"};
  const ValueId loss = b.add(b.reduce_sum(att.out, all), b.reduce_sum(b.scale(att.out, 2.0f), all));
  const auto grads = build_backward(b, loss, g.params());
  int attention_grads = 0;
  for (const Node& n : g.nodes()) attention_grads += n.kind == OpKind::kAttentionGrad;
  EXPECT_EQ(attention_grads, 1);
  const char* names[] = {"att.grad_q", "att.grad_k", "att.grad_v"};
  for (int i = 0; i < 3; ++i) {
    const Node& get = g.node(grads.at(g.params()[i]));
    EXPECT_EQ(get.kind, OpKind::kTupleGet);
    EXPECT_EQ(tuple_index(get.attrs), i);
    EXPECT_EQ(get.name, names[i]);
    EXPECT_EQ(g.node(get.inputs[0]).kind, OpKind::kAttentionGrad);
    EXPECT_EQ(get.shape, g.node(g.params()[i]).shape);
  }
  // The gradient flowing into the output is the sum of both readers'.
  const Node& grad_op = g.node(g.node(grads.at(in.q)).inputs[0]);
  EXPECT_EQ(g.node(grad_op.inputs[4]).kind, OpKind::kAdd);
}

TEST(Tuple, AutodiffRefusesAGradientThroughTheLogSumExp) {
  Graph g;
  GraphBuilder b(g);
  const Qkv in = qkv(b);
  const auto att = b.attention(in.q, in.k, in.v, "seq", "kseq", "head", true, 0.5f, "att");
  const ValueId loss = b.reduce_sum(att.lse, {"batch", "seq", "heads"});
  const std::string e = error_of([&] { build_backward(b, loss, g.params()); });
  EXPECT_NE(e.find("attention 'att': its log-sum-exp is on the path to the loss"),
            std::string::npos)
      << e;
}

// One buffer holds the tuple; its views point into it at the elements'
// offsets; it lives until the last reader of any element.
TEST(Tuple, ProgramGivesTheTupleOneBufferAndItsViewsTheirOffsets) {
  Graph g;
  GraphBuilder b(g);
  const Qkv in = qkv(b);
  const auto att = b.attention(in.q, in.k, in.v, "seq", "kseq", "head", true, 0.5f, "att");
  const ValueId late = b.scale(att.lse, 3.0f, "late");
  Program p(g, {att.out, late});
  std::vector<std::vector<float>> params;
  for (ValueId id : g.params()) {
    params.emplace_back(g.node(id).shape.numel(), 0.25f);
    p.bind_param(g.node(id).name, params.back().data());
  }
  p.run();
  const auto* base = static_cast<const uint8_t*>(p.device_ptr(att.out));
  EXPECT_EQ(static_cast<const uint8_t*>(p.device_ptr(att.lse)) - base, 512);
  EXPECT_EQ(p.value_bytes(att.lse), 2u * 5 * 4 * 4);
  // Equal keys and values: every output is 0.25, every lse log(visible keys) + 0.5 * 3 / 16 * ...
  for (float x : p.read_f32(att.out)) EXPECT_FLOAT_EQ(x, 0.25f);
  const std::vector<float> lse = p.read_f32(att.lse), scaled = p.read_f32(late);
  for (int64_t r = 0; r < 2 * 5 * 4; ++r) {
    const int64_t query = (r / 4) % 5;
    EXPECT_NEAR(lse[r], std::log(query + 1.0) + 0.5 * 3 * 0.0625, 1e-6) << r;
    EXPECT_FLOAT_EQ(scaled[r], 3 * lse[r]);
  }
  // Buffers: the tuple (one request of its packed size) and the scale.
  int tuple_buffers = 0;
  for (const BufferRequest& r : p.buffer_requests())
    tuple_buffers += r.bytes == static_cast<size_t>(g.node(att.tuple).shape.numel()) * 4;
  EXPECT_EQ(tuple_buffers, 1);
  EXPECT_EQ(p.buffer_requests().size(), 2u);
}

// Heads split on a model axis: q, k and v arrive split, the attention runs on
// the local heads and the tuple's elements come out split, with no collective.
TEST(Tuple, LoweringSplitsHeadsAndPlacesElementsAsTheTuple) {
  Graph g;
  GraphBuilder b(g);
  const Qkv in = qkv(b);
  const auto att = b.attention(in.q, in.k, in.v, "seq", "kseq", "head", true, 0.5f, "att");
  const std::vector<std::string> all = {"batch", "seq", "heads", "head"};
  const ValueId loss = b.reduce_sum(att.out, all, "loss");
  const auto grads = build_backward(b, loss, g.params());
  std::vector<ValueId> outputs = {loss};
  for (ValueId p : g.params()) outputs.push_back(grads.at(p));
  const Mesh mesh = Mesh::parse("model=2");
  const Layout layout = Layout::parse("heads=model", mesh);
  const LocalGraph local = lower_to_rank(g, outputs, mesh, layout, 1);
  const Node& tuple = local.graph.node(local.local_of[att.tuple]);
  ASSERT_EQ(tuple.kind, OpKind::kAttention);
  EXPECT_EQ(tuple.elements[0].shape, (Shape{kBatch, kSeq, {"heads", 2}, kHead}));
  EXPECT_EQ(tuple.elements[1].shape, (Shape{kBatch, kSeq, {"heads", 2}}));
  EXPECT_EQ(local.sharding_of[att.tuple].to_string(), local.sharding_of[att.out].to_string());
  // Only the loss (its partial sum, its gradient's seed) is converted.
  for (const InsertedCollective& c : local.collectives)
    EXPECT_EQ(c.value.rfind("loss", 0), 0u) << op_name(c.op) << " of " << c.value;
  for (ValueId p : g.params())
    EXPECT_EQ(local.graph.node(local.local_of[grads.at(p)]).shape.size("heads"), 2);
}

}  // namespace
}  // namespace tessel
