// ZeRO's flat optimizer state (compile/zero.h, compile/rank_storage.h),
// without running anything: every parameter's moments are this rank's chunk
// of its local block flattened, 1/N of it over N data ranks whatever the
// parameter's dims and layout (a tensor-parallel leading dim, a size the
// data degree does not divide), in single programs and pipelines, and the
// memory prediction counts exactly that.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "common/tiny_gpt.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/compile/rank_storage.h"
#include "tessel/compile/zero.h"

namespace tessel {
namespace {

TEST(FlatShard, SplitsABlockIntoEqualChunksWithThePaddingLast) {
  const FlatShard even{0, 4, 12};
  EXPECT_EQ(even.chunk(), 3);
  EXPECT_EQ(even.padded(), 12);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(even.offset(k), 3 * k);
    EXPECT_EQ(even.count(k), 3);
  }
  const FlatShard odd{0, 4, 5};  // chunks of 2: 2, 2, 1, and none on the last rank
  EXPECT_EQ(odd.chunk(), 2);
  EXPECT_EQ(odd.padded(), 8);
  const int64_t counts[] = {2, 2, 1, 0};
  for (int k = 0; k < 4; ++k) EXPECT_EQ(odd.count(k), counts[k]) << k;
  EXPECT_EQ(odd.offset(3), 5);  // never past the block
  const Mesh mesh = Mesh::parse("data=1,model=2");
  EXPECT_FALSE(flat_shard(10, mesh, 0).has_value()) << "one data rank: nothing to shard";
  EXPECT_FALSE(flat_shard(10, mesh, -1).has_value()) << "no data axis";
}

CompiledRank plan(TrainConfig c, const std::string& mesh_text, int zero, int rank = 0) {
  c.mesh = mesh_text;
  c.zero = zero;
  c.validate(/*with_data=*/false);
  const Mesh mesh = Mesh::parse(c.mesh);
  return compile_rank(c, mesh, layout_for(c, mesh), rank, CompileMode::kPlanOnly);
}

std::map<std::string, const StoredParam*> by_name(const RankStorage& s) {
  std::map<std::string, const StoredParam*> out;
  for (const StoredParam& p : s.params) out[p.name] = &p;
  return out;
}

// Every held parameter's moments are ceil(block / N); the optimizer's bytes
// are twice their sum.
void expect_flat_moments(const CompiledRank& c, int n) {
  const RankStorage s = rank_storage(c);
  int64_t moments = 0;
  for (const StoredParam& p : s.params) {
    if (!p.held) continue;
    ASSERT_TRUE(p.zero.has_value()) << p.name;
    EXPECT_EQ(p.zero->ranks, n) << p.name;
    EXPECT_EQ(p.zero->block, p.value_numel) << p.name;
    EXPECT_EQ(p.state_numel, (p.value_numel + n - 1) / n) << p.name;
    moments += p.state_numel;
  }
  EXPECT_EQ(predict_rank_memory(c).optimizer, 2 * 4 * moments);
}

// data=4 x model=2, ZeRO 1: w2 leads with the hidden dim, split on `model`,
// and wte with the vocab: before flat shards they kept whole moments.
TEST(ZeroState, ModelSplitLeadingDimsGetAQuarterOfTheirBlockOnData4) {
  const CompiledRank c = plan(tiny_gpt_config(2, 16), "data=4,model=2", 1, /*rank=*/3);
  expect_flat_moments(c, 4);
  const RankStorage s = rank_storage(c);
  const auto p = by_name(s);
  for (const char* name : {"block0.mlp.w2", "block1.attn.wo", "wte"}) {
    const StoredParam& w = *p.at(name);
    EXPECT_EQ(w.state_numel * 4, w.value_numel) << name;
    EXPECT_FALSE(w.grad_is_chunk) << name << ": its gradient is all-reduced whole";
  }
  // w1 leads with the embedding dim: the lowering's reduce-scatter leaves
  // exactly the chunk (its leading-dim slice).
  const StoredParam& w1 = *p.at("block0.mlp.w1");
  EXPECT_TRUE(w1.grad_is_chunk);
  EXPECT_EQ(w1.gradient_numel(), w1.value_numel / 4);
  EXPECT_EQ(p.at("block0.mlp.w2")->gradient_numel(), p.at("block0.mlp.w2")->value_numel);
}

// data=3 divides none of this model's blocks (powers of two, the vocab):
// the last chunks are padded, and the largest padded block has its host
// buffer.
TEST(ZeroState, PadsBlocksTheDataSizeDoesNotDivide) {
  const CompiledRank c = plan(tiny_gpt_config(2, 12), "data=3", 2, /*rank=*/2);
  expect_flat_moments(c, 3);
  const RankStorage s = rank_storage(c);
  const StoredParam& wpe = *by_name(s).at("wpe");  // 16 x 32 = 512 = 3 x 171 - 1
  EXPECT_EQ(wpe.zero->chunk(), 171);
  EXPECT_EQ(wpe.zero->count(2), 170);
  int64_t largest_padded = 0;
  for (const StoredParam& p : s.params)
    largest_padded = std::max(largest_padded, p.zero->padded() * 4);
  EXPECT_EQ(s.zero_block, largest_padded);
  EXPECT_EQ(predict_rank_memory(c).zero_block, largest_padded);
}

// A pipeline: every parameter its stage holds, whatever its layout.
TEST(ZeroState, PipelineShardsEveryParameterFlat) {
  TrainConfig t = tiny_gpt_config(4, 16);
  t.microbatches = 2;
  for (int rank : {0, 8}) {  // the first and the last stage
    const CompiledRank c = plan(t, "pipe=2,data=4,model=2", 1, rank);
    ASSERT_TRUE(c.pipelined());
    expect_flat_moments(c, 4);
    const RankMemory m = predict_rank_memory(c);
    EXPECT_EQ(m.optimizer * 4, 2 * m.parameters) << "rank " << rank << ": 8/N bytes a parameter";
  }
}

// ZeRO 3 in a single program: parameters the lowering stores as their
// data-axis shard keep that shard as their state; the others (a model-split
// leading dim) stay whole but their moments are still flat chunks.
TEST(ZeroState, ZeroThreeShardsTheRestFlat) {
  const CompiledRank c = plan(tiny_gpt_config(2, 16), "data=2,model=2", 3);
  const RankStorage s = rank_storage(c);
  const auto p = by_name(s);
  const StoredParam& w1 = *p.at("block0.mlp.w1");
  EXPECT_FALSE(w1.zero.has_value());
  EXPECT_EQ(w1.state_numel, w1.value_numel) << "stored as its shard";
  const StoredParam& w2 = *p.at("block0.mlp.w2");
  ASSERT_TRUE(w2.zero.has_value());
  EXPECT_EQ(2 * w2.state_numel, w2.value_numel);
}

}  // namespace
}  // namespace tessel
