#include "tessel/train/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "tessel/base/error.h"

namespace tessel {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies raw bytes and assumes a little-endian host");

using OrderedJson = nlohmann::ordered_json;
using Json = nlohmann::json;

constexpr const char* kMetadataKey = "__metadata__";
// Largest element count we accept for one tensor (keeps byte counts far from overflow).
constexpr int64_t kMaxElements = int64_t{1} << 50;

struct Piece {
  const void* data;
  size_t size;
  const std::function<const void*()>* produce = nullptr;  // replaces `data` when set
};

std::string errno_text() { return std::strerror(errno); }

// Writes all pieces to `path + ".tmp"`, fsyncs, renames over `path`, fsyncs
// the directory. On failure removes the temporary and throws.
void write_pieces_atomically(const std::string& path, const std::vector<Piece>& pieces) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) TS_THROW("cannot create '", tmp, "' (writing '", path, "'): ", errno_text());
  auto fail = [&](const std::string& what) {
    std::string reason = errno_text();
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    TS_THROW("cannot ", what, " '", tmp, "' (writing '", path, "'): ", reason);
  };
  for (const Piece& piece : pieces) {
    const void* bytes = piece.data;
    if (piece.produce) {
      try {
        bytes = (*piece.produce)();
      } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
      }
    }
    const char* p = static_cast<const char*>(bytes);
    size_t left = piece.size;
    while (left > 0) {
      ssize_t n = ::write(fd, p, std::min<size_t>(left, size_t{1} << 30));
      if (n < 0) {
        if (errno == EINTR) continue;
        fail("write");
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  if (::fsync(fd) != 0) fail("fsync");
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename to final name");
  // Make the rename itself durable. Failure here is not fatal to the data.
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Product of dims times itemsize, or throws (negative dim, overflow).
uint64_t shape_bytes(const std::vector<int64_t>& shape, size_t itemsize, const std::string& where) {
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0) TS_THROW(where, ": negative dimension ", d);
    if (d != 0 && elements > kMaxElements / d) TS_THROW(where, ": shape is implausibly large");
    elements *= d;
  }
  return static_cast<uint64_t>(elements) * itemsize;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  return "[" + str_join(shape, ", ") + "]";
}

// A non-negative JSON integer no larger than `limit`, or throws.
uint64_t json_uint(const Json& v, uint64_t limit, const std::string& where) {
  if (v.is_number_unsigned()) {
    uint64_t x = v.get<uint64_t>();
    if (x <= limit) return x;
    TS_THROW(where, " is too large (", x, ")");
  }
  if (v.is_number_integer()) TS_THROW(where, " is negative (", v.get<int64_t>(), ")");
  TS_THROW(where, " must be a non-negative integer, found ", v.dump());
}

// Bytes per element of a safetensors dtype name; 0 if Tessel does not support it.
size_t safetensors_dtype_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "BF16") return 2;
  if (dtype == "F64") return 8;
  return 0;
}

}  // namespace

const TensorRecord* SafetensorsFile::find(const std::string& name) const {
  for (const TensorRecord& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  header[kMetadataKey] = OrderedJson::object();
  for (const auto& [key, value] : metadata) header[kMetadataKey][key] = value;

  std::set<std::string> names;
  uint64_t offset = 0;
  for (const TensorView& t : tensors) {
    const std::string where = str_cat("safetensors file '", path, "': tensor '", t.name, "'");
    if (t.name.empty()) TS_THROW("safetensors file '", path, "': tensor with an empty name");
    if (t.name == kMetadataKey) TS_THROW(where, ": name is reserved for metadata");
    if (!names.insert(t.name).second) TS_THROW(where, ": duplicate tensor name");
    const size_t itemsize = safetensors_dtype_size(t.dtype);
    if (itemsize == 0)
      TS_THROW(where, ": unsupported dtype \"", t.dtype, "\" (expected F32, I32, BF16 or F64)");
    const uint64_t expected = shape_bytes(t.shape, itemsize, where);
    if (t.nbytes != expected)
      TS_THROW(where, ": has ", t.nbytes, " bytes but shape ", shape_str(t.shape), " of ", t.dtype,
               " needs ", expected);
    if (t.nbytes > 0 && t.data == nullptr && !t.produce) TS_THROW(where, ": data pointer is null");
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.nbytes}}};
    offset += t.nbytes;
  }

  std::string json;
  try {
    json = header.dump();  // Strict: throws on invalid UTF-8 in names / metadata.
  } catch (const nlohmann::json::exception& e) {
    TS_THROW("safetensors file '", path,
             "': a tensor name or metadata entry is not valid UTF-8: ", e.what());
  }
  json.append((8 - json.size() % 8) % 8, ' ');
  uint8_t length[8];
  uint64_t n = json.size();
  std::memcpy(length, &n, 8);

  std::vector<Piece> pieces = {{length, 8}, {json.data(), json.size()}};
  for (const TensorView& t : tensors)
    if (t.nbytes > 0) pieces.push_back({t.data, t.nbytes, t.produce ? &t.produce : nullptr});
  write_pieces_atomically(path, pieces);
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) TS_THROW("cannot open safetensors file '", path, "'");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    TS_THROW("cannot open safetensors file '", path, "' (not a regular file)");
  }
  file_bytes_ = static_cast<uint64_t>(st.st_size);
  try {
    const std::string where = str_cat("safetensors file '", path, "'");
    if (file_bytes_ < 8)
      TS_THROW(where, " is too short: ", file_bytes_,
               " bytes, need at least 8 for the header length");
    uint64_t header_len;
    pread_all(0, 8, &header_len, "the header length");
    if (header_len > file_bytes_ - 8)
      TS_THROW(where, ": header length ", header_len, " runs past the end of the file (",
               file_bytes_, " bytes)");
    data_start_ = 8 + header_len;
    const uint64_t data_size = file_bytes_ - data_start_;
    std::string text(header_len, '\0');
    pread_all(8, header_len, text.data(), "the header");

    Json header;
    try {
      header = Json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      TS_THROW(where, ": header is not valid JSON: ", e.what());
    }
    if (!header.is_object()) TS_THROW(where, ": header must be a JSON object");

    for (const auto& [name, value] : header.items()) {
      if (name == kMetadataKey) {
        if (!value.is_object()) TS_THROW(where, ": __metadata__ must be an object of strings");
        for (const auto& [key, v] : value.items()) {
          if (!v.is_string())
            TS_THROW(where, ": metadata key '", key, "' must map to a string, found ", v.dump());
          metadata_[key] = v.get<std::string>();
        }
        continue;
      }
      const std::string tw = str_cat(where, ": tensor '", name, "'");
      if (!value.is_object()) TS_THROW(tw, " must be described by a JSON object");
      if (!value.contains("dtype") || !value["dtype"].is_string())
        TS_THROW(tw, " has no string \"dtype\"");
      if (!value.contains("shape") || !value["shape"].is_array())
        TS_THROW(tw, " has no array \"shape\"");
      if (!value.contains("data_offsets") || !value["data_offsets"].is_array() ||
          value["data_offsets"].size() != 2)
        TS_THROW(tw, " has no two-element \"data_offsets\"");

      Tensor e;
      e.name = name;
      e.dtype = value["dtype"].get<std::string>();
      const size_t itemsize = safetensors_dtype_size(e.dtype);
      if (itemsize == 0)
        TS_THROW(tw, " has unsupported dtype \"", e.dtype, "\" (expected F32, I32, BF16 or F64)");
      for (const Json& d : value["shape"])
        e.shape.push_back(static_cast<int64_t>(
            json_uint(d, static_cast<uint64_t>(kMaxElements), tw + " shape dim")));
      e.begin = json_uint(value["data_offsets"][0], data_size, tw + " data_offsets begin");
      e.end = json_uint(value["data_offsets"][1], data_size, tw + " data_offsets end");
      if (e.end < e.begin)
        TS_THROW(tw, " has data_offsets [", e.begin, ", ", e.end, "] with end before begin");
      const uint64_t expected = shape_bytes(e.shape, itemsize, tw);
      if (e.end - e.begin != expected)
        TS_THROW(tw, " has data_offsets [", e.begin, ", ", e.end, "] spanning ", e.end - e.begin,
                 " bytes but shape ", shape_str(e.shape), " of ", e.dtype, " needs ", expected);
      tensors_.push_back(std::move(e));
    }

    std::sort(tensors_.begin(), tensors_.end(), [](const Tensor& a, const Tensor& b) {
      return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
    });
    uint64_t cursor = 0;
    const std::string* previous = nullptr;
    for (const Tensor& e : tensors_) {
      if (e.begin < cursor)
        TS_THROW(where, ": tensor '", e.name, "' at [", e.begin, ", ", e.end, "] overlaps tensor '",
                 *previous, "' ending at ", cursor);
      if (e.begin > cursor)
        TS_THROW(where, ": tensor '", e.name, "' starts at ", e.begin,
                 " leaving a gap of unused bytes after offset ", cursor);
      cursor = e.end;
      previous = &e.name;
    }
    if (cursor != data_size)
      TS_THROW(where, ": data section has ", data_size, " bytes but the tensors cover only ",
               cursor, " (trailing bytes or a missing tensor)");
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsReader::~SafetensorsReader() {
  if (fd_ >= 0) ::close(fd_);
}

const SafetensorsReader::Tensor* SafetensorsReader::find(const std::string& name) const {
  for (const Tensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void SafetensorsReader::pread_all(uint64_t position, uint64_t nbytes, void* out,
                                  const std::string& what) {
  char* p = static_cast<char*>(out);
  while (nbytes > 0) {
    const ssize_t n = ::pread(fd_, p, std::min<uint64_t>(nbytes, uint64_t{1} << 30),
                              static_cast<off_t>(position));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      TS_THROW("error while reading ", what, " of safetensors file '", path_, "': ", errno_text());
    if (n == 0)
      TS_THROW("safetensors file '", path_, "' ends early (changed while being read?) at byte ",
               position, ", reading ", what);
    p += n;
    position += static_cast<uint64_t>(n);
    nbytes -= static_cast<uint64_t>(n);
    bytes_read_ += static_cast<uint64_t>(n);
  }
}

void SafetensorsReader::read(const Tensor& tensor, uint64_t offset, uint64_t nbytes, void* out) {
  if (offset > tensor.end - tensor.begin || nbytes > tensor.end - tensor.begin - offset)
    TS_THROW("safetensors file '", path_, "': bytes [", offset, ", ", offset + nbytes,
             ") are outside tensor '", tensor.name, "' (", tensor.end - tensor.begin, " bytes)");
  pread_all(data_start_ + tensor.begin + offset, nbytes, out, "tensor '" + tensor.name + "'");
}

SafetensorsFile read_safetensors(const std::string& path) {
  SafetensorsReader reader(path);
  SafetensorsFile result;
  result.metadata = reader.metadata();
  result.tensors.reserve(reader.tensors().size());
  for (const SafetensorsReader::Tensor& t : reader.tensors()) {
    TensorRecord record{t.name, t.dtype, t.shape, {}};
    record.bytes.resize(t.end - t.begin);
    reader.read(t, 0, record.bytes.size(), record.bytes.data());
    result.tensors.push_back(std::move(record));
  }
  return result;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  write_pieces_atomically(path, {{contents.data(), contents.size()}});
}

}  // namespace tessel
