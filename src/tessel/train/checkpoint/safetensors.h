// Checkpoint files in the safetensors format, and atomic file replacement.
//
// Layout: an 8-byte little-endian u64 N, then N bytes of JSON header (padded
// with spaces so the data section starts 8-byte aligned), then the raw
// little-endian tensor bytes. The header maps "__metadata__" to a
// string->string object and each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]}, offsets relative to the
// start of the data section. Tensors are written contiguously in the order
// given; a file read back must have its tensors tile the data section exactly
// (no overlap, no gap, no trailing bytes), as the reference implementation
// requires. Supported dtypes: "F32", "I32" (4 bytes), "BF16" (2 bytes) and
// "F64" (8 bytes; only test fixtures use it: checkpoints demand F32).
//
// Writes never leave a half-written file under the final name: they go to
// `path + ".tmp"`, which is fsynced and then renamed over `path` (and the
// directory fsynced), so a crash leaves either the old file or the new one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessel {

// A tensor to write; `data` is borrowed and must hold `nbytes` bytes, which
// must equal product(shape) * itemsize(dtype). Instead of `data`, `produce`
// may return the bytes: it is called once, just before they are written, and
// its result need only stay valid until the next call (a sharded run gathers
// one full tensor at a time).
struct TensorView {
  std::string name;
  std::string dtype;  // "F32", "I32", "BF16" or "F64".
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  std::function<const void*()> produce = nullptr;
};

// A tensor read from a file, owning its bytes (little-endian, row-major).
struct TensorRecord {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<TensorRecord> tensors;  // In data-section order.
  // The tensor called `name`, or nullptr.
  const TensorRecord* find(const std::string& name) const;
};

// Validates every tensor (known dtype, non-negative dims, nbytes matching the
// shape, non-empty unique names other than "__metadata__", valid UTF-8 names
// and metadata) and only then writes `path` atomically. Throws naming the path
// and the tensor or key at fault.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata);

// Reads and fully validates a safetensors file: length prefix, header bounds,
// JSON syntax and structure, dtypes, shapes, and data offsets (in range,
// matching shape * itemsize, non-overlapping, tiling the data section).
// Throws naming the path and the tensor at fault.
SafetensorsFile read_safetensors(const std::string& path);

// A safetensors file opened for reading byte ranges: the constructor reads
// and validates the header exactly as read_safetensors does (the header
// length is checked against the file's size before anything is allocated),
// and read() then fetches any byte range of one tensor with pread, so a rank
// reads only its own shards. Counts the bytes it read (header included).
class SafetensorsReader {
 public:
  struct Tensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // data_offsets: relative to the data section
  };
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }  // in data-section order
  const Tensor* find(const std::string& name) const;
  // Copies bytes [offset, offset + nbytes) of `tensor`'s data into `out`;
  // throws naming the file and tensor if the range is outside the tensor or
  // the file is shorter than its header said.
  void read(const Tensor& tensor, uint64_t offset, uint64_t nbytes, void* out);
  uint64_t file_bytes() const { return file_bytes_; }
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  void pread_all(uint64_t position, uint64_t nbytes, void* out, const std::string& what);

  std::string path_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0, data_start_ = 0, bytes_read_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<Tensor> tensors_;
};

// Replaces `path` with `contents` via `path + ".tmp"`, fsync and rename.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace tessel
