// bf16 activation storage (CompileOptions::bf16_activations): a bf16
// program stores in bf16 exactly the values that only einsums read, so the
// numbers are those of a bf16 program that stores every activation in f32
// (the einsums round their operands to bf16 either way), in a smaller arena.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "common/error_of.h"
#include "common/tiny_gpt_training.h"
#include "tessel/autodiff/backward.h"
#include "tessel/ir/op_table.h"
#include "tessel/runtime/program.h"
#include "tessel/train/param_store.h"
#include "tessel/train/task.h"

namespace tessel {
namespace {

std::vector<float> run(Program& p, const TinyGptTraining& t, ParamStore& params) {
  for (ParamEntry& e : params.entries()) p.bind_param(e.name, e.value.device_f32());
  for (const char* name : {"tokens", "targets"}) {
    std::vector<int32_t> ids(2 * 16);
    for (int i = 0; i < 2 * 16; ++i) ids[i] = (i * 7 + 3) % 256;
    p.write_input(name, ids.data(), ids.size() * sizeof(int32_t));
  }
  p.run();
  std::vector<float> r;
  for (ValueId v : t.outputs) {
    const std::vector<float> x = p.read_f32(v);
    r.insert(r.end(), x.begin(), x.end());
  }
  return r;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(Bf16Activations, SameNumbersSmallerArena) {
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, cpu_backend(), 7);
  CompileOptions f32_stored;
  f32_stored.bf16 = true;
  f32_stored.bf16_activations = false;
  CompileOptions bf16_stored = f32_stored;
  bf16_stored.bf16_activations = true;
  Program a(t.graph, t.outputs, f32_stored), b(t.graph, t.outputs, bf16_stored);
  EXPECT_EQ(a.bf16_value_bytes(), 0u);
  EXPECT_GT(b.bf16_value_bytes(), 0u);
  EXPECT_LT(b.arena_bytes(), a.arena_bytes());

  std::vector<float> want = run(a, t, params), got = run(b, t, params);
  ASSERT_EQ(got.size(), want.size());
  if (kernels::bf16_route() == kernels::Bf16Route::kWidenedF32) {
    // The same f32 GEMM plans on the same bf16 values: bit for bit.
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
  } else {
    // oneDNN may pick another kernel (another summation order) for an
    // operand read in place as bf16 than for its dense bf16 copy.
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4 * (std::fabs(want[i]) + 1e-3)) << i;
  }
}

TEST(Bf16Activations, OnlyValuesEinsumsAloneReadAreBf16) {
  // Unfused attention: its q, k and v are read by einsums alone.
  TinyGptTraining t = tiny_gpt_training("unfused");
  CompileOptions options;
  options.bf16 = true;
  Program p(t.graph, t.outputs, options);
  const Graph& g = p.graph();
  // Which values: attention's q, k, v, the LayerNorm outputs feeding GEMMs,
  // the MLP's hidden after GELU, and gradients read only by GEMMs.
  int q = 0, k = 0, v = 0, act = 0, ln = 0;
  for (ValueId id = 0; id < g.size(); ++id) {
    const Node& node = g.node(id);
    if (!p.stored_bf16(id)) continue;
    q += ends_with(node.name, "attn.q_bias");
    k += ends_with(node.name, "attn.k") && node.kind == OpKind::kEinsum;
    v += ends_with(node.name, "attn.v_bias");
    act += ends_with(node.name, "mlp.act");
    ln += node.kind == OpKind::kLayerNorm;
  }
  EXPECT_EQ(q, 2);
  EXPECT_EQ(k, 2);
  EXPECT_EQ(v, 2);
  EXPECT_EQ(act, 2);
  EXPECT_EQ(ln, 5);  // ln1 and ln2 of each block, and ln_f (read by lm_head)
  // Everything else reads f32: no non-einsum op has a bf16 input, and no
  // output (loss, parameter gradients) is bf16.
  for (ValueId id = 0; id < g.size(); ++id) {
    const Node& node = g.node(id);
    if (node.kind == OpKind::kEinsum) continue;
    if (op_info(node.kind).is_view()) continue;
    for (ValueId in : node.inputs) {
      EXPECT_FALSE(p.stored_bf16(in)) << node.name << " reads bf16 " << g.node(in).name;
    }
  }
  for (ValueId out : t.outputs) EXPECT_FALSE(p.stored_bf16(out)) << g.node(out).name;
  // Softmax's probabilities are read by its backward: f32.
  for (ValueId id = 0; id < g.size(); ++id) {
    if (g.node(id).kind == OpKind::kSoftmax) {
      EXPECT_FALSE(p.stored_bf16(id));
    }
  }
}

// Fused attention rounds q, k, v and its output's gradient itself, as an
// einsum does: they are stored in bf16 too; its tuples never are.
TEST(Bf16Activations, FusedAttentionOperandsAreBf16) {
  TinyGptTraining t = tiny_gpt_training("fused");
  CompileOptions options;
  options.bf16 = true;
  Program p(t.graph, t.outputs, options);
  const Graph& g = p.graph();
  int q = 0, k = 0, v = 0, dout = 0, grads = 0;
  for (ValueId id = 0; id < g.size(); ++id) {
    const Node& node = g.node(id);
    if (is_tuple(node)) {
      EXPECT_FALSE(p.stored_bf16(id)) << node.name;
    }
    if (node.kind == OpKind::kAttentionGrad) {
      ++grads;
      dout += p.stored_bf16(node.inputs[4]);
      EXPECT_FALSE(p.stored_bf16(node.inputs[3])) << "the log-sum-exp of " << node.name;
    }
    if (!p.stored_bf16(id)) continue;
    q += ends_with(node.name, "attn.q_bias");
    k += ends_with(node.name, "attn.k") && node.kind == OpKind::kEinsum;
    v += ends_with(node.name, "attn.v_bias");
  }
  EXPECT_EQ(grads, 2);
  EXPECT_EQ(q, 2);
  EXPECT_EQ(k, 2);
  EXPECT_EQ(v, 2);
  EXPECT_EQ(dout, 2);
}

TEST(Bf16Activations, ReadingABf16ValueAsF32IsAnError) {
  TinyGptTraining t = tiny_gpt_training();
  CompileOptions options;
  options.bf16 = true;
  std::vector<ValueId> outputs = t.outputs;
  Program p(t.graph, outputs, options);
  for (ValueId id = 0; id < p.graph().size(); ++id)
    if (p.stored_bf16(id)) {
      EXPECT_NE(error_of([&] { p.device_ptr(id); }).find("is stored in bf16"), std::string::npos);
      return;
    }
  FAIL() << "no value stored in bf16";
}

// CompileOptions::fuse_bias_adds: on oneDNN's route the bias adds of the
// attention and MLP projections run inside their einsums (fewer
// instructions, the einsums' own outputs never stored), with the same bits.
TEST(Bf16Activations, FusedBiasAddsGiveTheSameBitsInFewerInstructions) {
  if (kernels::bf16_route() != kernels::Bf16Route::kOneDnn)
    GTEST_SKIP() << "bias adds fuse only into oneDNN's bf16 matmul (" << kernels::onednn_cpu_isa()
                 << " has none)";
  TinyGptTraining t = tiny_gpt_training();
  ParamStore params(t.graph, cpu_backend(), 7);
  CompileOptions fused;
  fused.bf16 = true;
  CompileOptions separate = fused;
  separate.fuse_bias_adds = false;
  Program a(t.graph, t.outputs, separate), b(t.graph, t.outputs, fused);
  int bias_adds = 0;  // adds of a parameter to an einsum's output
  for (ValueId id = 0; id < t.graph.size(); ++id) {
    const Node& n = t.graph.node(id);
    if (n.kind != OpKind::kAdd) continue;
    const OpKind x = t.graph.node(n.inputs[0]).kind, y = t.graph.node(n.inputs[1]).kind;
    bias_adds += (x == OpKind::kEinsum && y == OpKind::kParam) ||
                 (y == OpKind::kEinsum && x == OpKind::kParam);
  }
  ASSERT_GT(bias_adds, 0);
  EXPECT_EQ(a.instruction_count() - b.instruction_count(), bias_adds);
  EXPECT_LE(b.arena_bytes(), a.arena_bytes());
  const std::vector<float> want = run(a, t, params), got = run(b, t, params);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)));
}

TEST(Bf16Activations, F32ProgramsStoreNothingInBf16) {
  TinyGptTraining t = tiny_gpt_training();
  Program p(t.graph, t.outputs);
  EXPECT_EQ(p.bf16_value_bytes(), 0u);
}

}  // namespace
}  // namespace tessel
