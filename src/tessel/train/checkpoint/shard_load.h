// Loading a checkpoint on any layout by reading only this rank's shards.
//
// Checkpoints hold full (global) tensors. A rank asks for the block of each
// parameter (and of its AdamW moments, which ZeRO may slice differently) it
// holds: offsets and sizes per dim. Only those byte ranges are read, at the
// tensors' safetensors offsets (pread of each contiguous run), never whole
// files. Everything is checked before anything is returned: every model
// parameter must be in the file with dtype F32 and the model's shape (held or
// not), no tensor may be extra, and the blocks read must be finite (a rank
// checks the values it reads; another rank's NaN is found by that rank, and
// any error under MPI ends the whole job).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/base/shape.h"

namespace tessel {

// A hyper-rectangle of a row-major tensor.
struct TensorBlock {
  std::vector<int64_t> offsets, sizes;  // per dim
  int64_t numel() const;
};

struct ShardRequest {
  std::string name;
  Shape shape;                 // global
  bool held = true;            // false: only checked (present, F32, shape), nothing read
  TensorBlock value, moments;  // this rank's block of the value and of m and v
};

struct ShardedCheckpoint {
  // Per request (empty where not held): the value block, and the moments'
  // blocks where the optimizer file holds them (else empty).
  std::vector<std::vector<float>> value, m, v;
  bool optimizer_loaded = false;  // optimizer.safetensors was present and read
  uint64_t bytes_read = 0;        // over the files opened, headers included
  uint64_t file_bytes = 0;        // their total size
};

// `with_optimizer`: read the moments when optimizer.safetensors exists.
ShardedCheckpoint load_checkpoint_shards(const std::string& dir,
                                         const std::vector<ShardRequest>& params,
                                         bool with_optimizer = true);

class SafetensorsReader;

// Reads `block` of tensor `name` (F32, global `shape`) from an open file into
// `out`, checking dtype, shape and finiteness; false if the file has no such
// tensor.
bool read_tensor_block(SafetensorsReader& file, const std::string& name, const Shape& shape,
                       const TensorBlock& block, std::vector<float>& out);

// The block of a whole tensor.
TensorBlock whole_block(const Shape& shape);

}  // namespace tessel
