#include "tessel/train/checkpoint/shard_load.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "tessel/base/error.h"
#include "tessel/comm/io_scope.h"
#include "tessel/train/checkpoint/safetensors.h"

namespace tessel {
namespace fs = std::filesystem;

int64_t TensorBlock::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

TensorBlock whole_block(const Shape& shape) {
  return {std::vector<int64_t>(shape.rank(), 0), shape.sizes()};
}

namespace {

// The tensor `name`, checked against the model (present, F32, its shape).
const SafetensorsReader::Tensor& checked(const SafetensorsReader& file, const std::string& name,
                                         const Shape& shape) {
  const SafetensorsReader::Tensor* t = file.find(name);
  if (!t) TS_THROW("checkpoint '", file.path(), "' has no tensor '", name, "'");
  if (t->dtype != "F32")
    TS_THROW("checkpoint '", file.path(), "': tensor '", name, "' is ", t->dtype, ", expected F32");
  if (t->shape != shape.sizes())
    TS_THROW("checkpoint '", file.path(), "': tensor '", name, "' has shape [",
             str_join(t->shape, ","), "] but the model expects ", shape);
  return *t;
}

// Reads `block` of tensor `t` (global `shape`) into `out`, one pread per
// contiguous run: the innermost dim the block cuts, times every dim inside it.
void read_block(SafetensorsReader& file, const SafetensorsReader::Tensor& t, const Shape& shape,
                const TensorBlock& block, std::vector<float>& out) {
  const int rank = shape.rank();
  if (static_cast<int>(block.offsets.size()) != rank ||
      static_cast<int>(block.sizes.size()) != rank)
    TS_THROW("checkpoint '", file.path(), "': block of tensor '", t.name, "' has ",
             block.offsets.size(), " dims, the tensor ", rank);
  for (int i = 0; i < rank; ++i)
    if (block.offsets[i] < 0 || block.sizes[i] < 0 ||
        block.offsets[i] + block.sizes[i] > shape[i].size)
      TS_THROW("checkpoint '", file.path(), "': block [", block.offsets[i], ", ",
               block.offsets[i] + block.sizes[i], ") of dim '", shape[i].name, "' of tensor '",
               t.name, "' is outside its size ", shape[i].size);
  out.resize(block.numel());
  if (out.empty()) return;
  // Dims k+1.. are whole, so a run is sizes[k] * (elements inside dim k).
  int k = rank - 1;
  int64_t inner = 1;
  while (k >= 0 && block.sizes[k] == shape[k].size) inner *= shape[k--].size;
  if (k < 0) {  // the whole tensor
    file.read(t, 0, out.size() * sizeof(float), out.data());
    return;
  }
  const int64_t run = block.sizes[k] * inner;
  std::vector<int64_t> strides = shape.strides(), idx(k, 0);
  for (int64_t done = 0; done < block.numel(); done += run) {
    int64_t element = block.offsets[k] * strides[k];
    for (int i = 0; i < k; ++i) element += (block.offsets[i] + idx[i]) * strides[i];
    file.read(t, static_cast<uint64_t>(element) * sizeof(float), run * sizeof(float),
              out.data() + done);
    for (int i = k - 1; i >= 0; --i) {
      if (++idx[i] < block.sizes[i]) break;
      idx[i] = 0;
    }
  }
}

void check_finite(const std::string& path, const std::string& name, const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      TS_THROW("checkpoint '", path, "': tensor '", name, "' holds ", v[i], " at element ", i,
               " of this rank's block (a diverged or damaged checkpoint)");
}

void check_no_extra(const SafetensorsReader& file, const std::set<std::string>& expected) {
  for (const SafetensorsReader::Tensor& t : file.tensors())
    if (!expected.count(t.name))
      TS_THROW("checkpoint '", file.path(), "' holds tensor '", t.name,
               "' that the model described by its manifest.json does not have (does the "
               "manifest's config, e.g. 'n_layer', match the file?)");
}

}  // namespace

bool read_tensor_block(SafetensorsReader& file, const std::string& name, const Shape& shape,
                       const TensorBlock& block, std::vector<float>& out) {
  if (!file.find(name)) return false;
  read_block(file, checked(file, name, shape), shape, block, out);
  check_finite(file.path(), name, out);
  return true;
}

ShardedCheckpoint load_checkpoint_shards(const std::string& dir,
                                         const std::vector<ShardRequest>& params,
                                         bool with_optimizer) {
  IoScope io("reading checkpoint '" + dir + "'");  // peers waiting meanwhile is no hang
  ShardedCheckpoint out;
  out.value.resize(params.size());
  out.m.resize(params.size());
  out.v.resize(params.size());
  {
    SafetensorsReader model((fs::path(dir) / "model.safetensors").string());
    std::set<std::string> names;
    for (size_t i = 0; i < params.size(); ++i) {
      const ShardRequest& p = params[i];
      names.insert(p.name);
      const SafetensorsReader::Tensor& t = checked(model, p.name, p.shape);
      if (!p.held) continue;
      read_block(model, t, p.shape, p.value, out.value[i]);
      check_finite(model.path(), p.name, out.value[i]);
    }
    check_no_extra(model, names);
    out.bytes_read += model.bytes_read();
    out.file_bytes += model.file_bytes();
  }
  const std::string opt_path = (fs::path(dir) / "optimizer.safetensors").string();
  if (!with_optimizer || !fs::exists(opt_path)) return out;
  SafetensorsReader opt(opt_path);
  std::set<std::string> names;
  for (size_t i = 0; i < params.size(); ++i) {
    const ShardRequest& p = params[i];
    if (!opt.find(p.name + ".m") && !opt.find(p.name + ".v")) continue;  // no state (e.g. SGD)
    names.insert(p.name + ".m");
    names.insert(p.name + ".v");
    const SafetensorsReader::Tensor& m = checked(opt, p.name + ".m", p.shape);
    const SafetensorsReader::Tensor& v = checked(opt, p.name + ".v", p.shape);
    if (!p.held) continue;
    read_block(opt, m, p.shape, p.moments, out.m[i]);
    read_block(opt, v, p.shape, p.moments, out.v[i]);
    check_finite(opt.path(), p.name + ".m", out.m[i]);
    check_finite(opt.path(), p.name + ".v", out.v[i]);
  }
  check_no_extra(opt, names);
  out.optimizer_loaded = true;
  out.bytes_read += opt.bytes_read();
  out.file_bytes += opt.file_bytes();
  return out;
}

}  // namespace tessel
