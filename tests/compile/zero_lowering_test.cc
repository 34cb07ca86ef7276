// ZeRO-3 in the lowering, without running anything: every parameter ZeRO
// shards is stored as its data-axis shard, gathered once in forward and at
// most once in backward, each gathered copy read only within its own phase
// (so the memory plan frees it before the other phase), and the signature
// choice gathers parameters rather than resharding activations around them.
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <string>

#include "tessel/compile/compile_rank.h"
#include "tessel/compile/zero.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

TrainConfig tiny_gpt(const std::string& mesh, int zero, const std::string& recompute = "none") {
  TrainConfig c;
  c.model = "gpt";
  c.n_layer = 2;
  c.n_head = 4;
  c.d_model = 64;
  c.context = 16;
  c.batch = 32;
  c.mesh = mesh;
  c.zero = zero;
  c.recompute = recompute;
  return c;
}

struct Lowered {
  TrainingGraph t;
  Mesh mesh;
  Layout layout;
  LocalGraph local;
};

Lowered lower(const TrainConfig& c, int rank = 0) {
  Lowered l{build_training_graph(c, c.batch), Mesh::parse(c.mesh), Layout(), {}};
  l.layout = Layout::defaults(l.mesh);
  std::vector<ValueId> outputs = {l.t.outputs.loss};
  outputs.insert(outputs.end(), l.t.grads.begin(), l.t.grads.end());
  l.local = lower_to_rank(l.t.graph, outputs, l.mesh, l.layout, rank,
                          training_lowering(l.t, c, l.layout, l.mesh));
  return l;
}

// Per parameter label: [forward gathers, backward gathers] on the data axis.
std::map<std::string, std::array<int, 2>> data_gathers(const Lowered& l) {
  const ValueId loss = l.local.local_of[l.t.outputs.loss];
  std::map<std::string, std::array<int, 2>> count;
  for (const InsertedCollective& c : l.local.collectives)
    if (c.op == OpKind::kAllGather && c.axis == "data") ++count[c.value][c.local > loss ? 1 : 0];
  return count;
}

TEST(ZeroThree, StoresShardsAndGathersEachParameterOncePerPhase) {
  for (const char* recompute : {"none", "blocks"}) {
    Lowered l = lower(tiny_gpt("data=2", 3, recompute));
    const auto gathers = data_gathers(l);
    for (ValueId p : l.t.graph.params()) {
      const Node& node = l.t.graph.node(p);
      EXPECT_EQ(l.local.sharding_of[p].to_string(), "[S(" + node.shape[0].name + ")]") << node.name;
      auto it = gathers.find(node.name);
      ASSERT_NE(it, gathers.end()) << node.name << " is never gathered (" << recompute << ")";
      EXPECT_EQ(it->second[0], 1) << node.name << ": gathers in forward (" << recompute << ")";
      EXPECT_LE(it->second[1], 1) << node.name << ": gathers in backward (" << recompute << ")";
    }
    // Weights are read again for the input gradients: gathered again, not kept.
    EXPECT_EQ(gathers.at("block1.mlp.w1")[1], 1);
    EXPECT_EQ(gathers.at("wte")[1], 1);
  }
}

TEST(ZeroThree, GatheredCopiesAreReadOnlyInTheirOwnPhase) {
  Lowered l = lower(tiny_gpt("data=2", 3));
  const Graph& g = l.local.graph;
  const ValueId loss = l.local.local_of[l.t.outputs.loss];
  for (const InsertedCollective& c : l.local.collectives) {
    if (c.op != OpKind::kAllGather || g.node(g.node(c.local).inputs[0]).kind != OpKind::kParam)
      continue;
    for (ValueId id = c.local + 1; id < g.size(); ++id) {
      for (ValueId in : g.node(id).inputs) {
        if (in != c.local) continue;
        EXPECT_EQ(id > loss, c.local > loss)
            << c.value << " gathered in " << (c.local > loss ? "backward" : "forward")
            << " is read by '" << g.node(id).name << "' in the other phase";
      }
    }
  }
}

// The lowering could avoid a gather by splitting the einsum on the weight's
// stored dim (resharding the activation to S(embed) with an all-to-all); it
// must gather the weight instead. No activation moves on the data axis
// beyond what plain data parallelism moves.
TEST(ZeroThree, GathersParametersRatherThanReshardingActivations) {
  for (const char* mesh : {"data=2", "data=2,model=2"}) {
    Lowered l = lower(tiny_gpt(mesh, 3));
    for (const InsertedCollective& c : l.local.collectives) {
      if (c.axis != "data") continue;
      EXPECT_NE(c.op, OpKind::kAllToAll) << mesh << ": " << c.value << " (" << c.reason << ")";
      if (c.op != OpKind::kAllGather) continue;
      const ValueId v = l.t.graph.find(c.value);
      EXPECT_TRUE(v >= 0 && l.t.graph.node(v).kind == OpKind::kParam)
          << mesh << ": gathers " << c.value << " (" << c.reason << ")";
    }
  }
}

// Under tensor parallelism, parameters whose leading dim is split on the
// model axis (the vocab-parallel embedding, the row-parallel w2 and wo, the
// heads/hidden biases) stay as ZeRO-2 leaves them: replicated on data.
TEST(ZeroThree, KeepsModelSplitLeadingDimsReplicatedOnData) {
  Lowered l = lower(tiny_gpt("data=2,model=2", 3));
  std::map<std::string, std::string> got;
  for (ValueId p : l.t.graph.params())
    got[l.t.graph.node(p).name] = l.local.sharding_of[p].to_string();
  EXPECT_EQ(got.at("wte"), "[B, S(vocab)]");
  EXPECT_EQ(got.at("block0.mlp.w2"), "[B, S(hidden)]");
  EXPECT_EQ(got.at("block0.attn.wo"), "[B, S(heads)]");
  EXPECT_EQ(got.at("block0.attn.bq"), "[B, S(heads)]");
  EXPECT_EQ(got.at("block0.mlp.b1"), "[B, S(hidden)]");
  EXPECT_EQ(got.at("block0.mlp.w1"), "[S(embed), S(hidden)]");
  EXPECT_EQ(got.at("block0.attn.wq"), "[S(embed), S(heads)]");
  EXPECT_EQ(got.at("wpe"), "[S(pos), B]");
}

}  // namespace
}  // namespace tessel
