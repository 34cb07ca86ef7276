// Sharded checkpoint loads read only the blocks a rank holds: the values
// equal the same blocks of a whole load, and the bytes read (counted by the
// reader, headers included) are a fraction of the files.
#include "tessel/train/checkpoint/shard_load.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/tiny_gpt.h"
#include "tessel/base/error.h"
#include "tessel/ir/builder.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/param_store.h"
#include "tessel/train/task.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

struct Saved {
  Graph graph;
  fs::path dir;
  std::unique_ptr<ParamStore> whole;  // loaded back whole
};

// A tiny GPT's parameters and (made-up, distinct) AdamW moments, saved and
// loaded back whole.
std::unique_ptr<Saved> save_tiny(const std::string& name) {
  auto s = std::make_unique<Saved>();
  TrainConfig c = tiny_gpt_config(2, 2);
  GraphBuilder b(s->graph);
  build_model(c, b, c.batch, /*training=*/true);
  ParamStore params(s->graph, cpu_backend(), 3);
  for (ParamEntry& e : params.entries()) {
    const std::vector<float> value = e.value.to_host();
    std::vector<float> m(value.size()), v(value.size());
    for (size_t i = 0; i < value.size(); ++i) {
      m[i] = 0.5f * value[i] + 1.0f;
      v[i] = static_cast<float>(i % 97) * 1e-3f;
    }
    e.m = DeviceTensor(cpu_backend(), e.value.shape());
    e.v = DeviceTensor(cpu_backend(), e.value.shape());
    e.m.write(m.data());
    e.v.write(v.data());
  }
  s->dir = fs::temp_directory_path() / ("tessel_shard_load_" + std::to_string(getpid()) + name);
  fs::remove_all(s->dir);
  save_checkpoint(s->dir.string(), c, params, 4);
  s->whole = std::make_unique<ParamStore>(s->graph, cpu_backend());
  load_checkpoint(s->dir.string(), *s->whole);
  return s;
}

// The second half of dim `d` (the whole tensor where it has fewer than 2 elements there).
TensorBlock second_half(const Shape& shape, int d) {
  TensorBlock b = whole_block(shape);
  if (d < shape.rank() && shape[d].size >= 2) {
    b.sizes[d] = shape[d].size / 2;
    b.offsets[d] = shape[d].size - b.sizes[d];
  }
  return b;
}

// The block of a whole tensor, copied out element by element.
std::vector<float> slice(const float* full, const Shape& shape, const TensorBlock& b) {
  std::vector<float> out;
  std::vector<int64_t> idx(shape.rank(), 0), strides = shape.strides();
  for (int64_t e = 0; e < b.numel(); ++e) {
    int64_t at = 0;
    for (int i = 0; i < shape.rank(); ++i) at += (b.offsets[i] + idx[i]) * strides[i];
    out.push_back(full[at]);
    for (int i = shape.rank() - 1; i >= 0; --i) {
      if (++idx[i] < b.sizes[i]) break;
      idx[i] = 0;
    }
  }
  return out;
}

TEST(ShardLoad, ReadsOnlyTheBlocksItHoldsAndGetsTheirValues) {
  auto saved = save_tiny("blocks");
  std::vector<ShardRequest> requests;
  uint64_t block_bytes = 0;
  for (const ParamEntry& e : saved->whole->entries()) {
    const Shape& shape = e.value.shape();
    // Values: half of the leading dim (contiguous); moments: half of the
    // last dim (one run per row), as a model-split and a ZeRO slice would.
    ShardRequest r{e.name, shape, true, second_half(shape, 0),
                   second_half(shape, shape.rank() - 1)};
    block_bytes += (r.value.numel() + 2 * r.moments.numel()) * sizeof(float);
    requests.push_back(r);
  }
  ShardedCheckpoint got = load_checkpoint_shards(saved->dir.string(), requests);
  ASSERT_TRUE(got.optimizer_loaded);
  for (size_t i = 0; i < requests.size(); ++i) {
    const ParamEntry& e = saved->whole->entries()[i];
    const ShardRequest& r = requests[i];
    EXPECT_EQ(got.value[i], slice(e.value.to_host().data(), e.value.shape(), r.value)) << e.name;
    EXPECT_EQ(got.m[i], slice(e.m.to_host().data(), e.value.shape(), r.moments)) << e.name << ".m";
    EXPECT_EQ(got.v[i], slice(e.v.to_host().data(), e.value.shape(), r.moments)) << e.name << ".v";
  }
  // The data read is exactly the blocks; the rest is the two headers.
  EXPECT_GE(got.bytes_read, block_bytes);
  EXPECT_LT(got.bytes_read - block_bytes, 16384u);
  EXPECT_LT(got.bytes_read, got.file_bytes * 6 / 10)
      << got.bytes_read << " of " << got.file_bytes << " bytes";
  fs::remove_all(saved->dir);
}

// A parameter another pipeline rank holds is checked but not read.
TEST(ShardLoad, ParametersNotHeldAreNotRead) {
  auto saved = save_tiny("held");
  std::vector<ShardRequest> requests;
  for (const ParamEntry& e : saved->whole->entries())
    requests.push_back({e.name, e.value.shape(), e.name == "wpe", whole_block(e.value.shape()),
                        whole_block(e.value.shape())});
  ShardedCheckpoint got = load_checkpoint_shards(saved->dir.string(), requests, false);
  EXPECT_FALSE(got.optimizer_loaded);
  uint64_t wpe = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].name != "wpe") {
      EXPECT_TRUE(got.value[i].empty()) << requests[i].name;
      continue;
    }
    wpe = got.value[i].size() * sizeof(float);
    const ParamEntry& e = saved->whole->entries()[i];
    EXPECT_EQ(got.value[i], e.value.to_host());
  }
  ASSERT_GT(wpe, 0u);
  EXPECT_LT(got.bytes_read - wpe, 16384u);  // the header only
  // A block outside the tensor is an error naming the tensor and dim.
  requests[0].held = true;
  requests[0].value.offsets[0] = 1;
  try {
    load_checkpoint_shards(saved->dir.string(), requests, false);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("of tensor '" + requests[0].name + "'"), std::string::npos)
        << e.what();
  }
  fs::remove_all(saved->dir);
}

}  // namespace
}  // namespace tessel
