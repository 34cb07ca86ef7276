#include "tessel/train/data/fashion_mnist.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <limits>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"

namespace tessel {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // ubyte, 3 dims.
constexpr uint32_t kLabelsMagic = 0x00000801;  // ubyte, 1 dim.

// Decompresses a whole .gz file. gzread also passes through an uncompressed
// file unchanged, which is harmless.
std::vector<uint8_t> read_gz(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    TS_THROW("Fashion-MNIST file '", path,
             "' is missing; install it with `apt-get install dataset-fashion-mnist`");
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) TS_THROW("cannot open Fashion-MNIST file '", path, "'");
  gzbuffer(file, 1 << 17);
  std::vector<uint8_t> out;
  constexpr size_t kChunk = 1 << 20;
  int n = 0;
  do {
    const size_t old = out.size();
    out.resize(old + kChunk);
    n = gzread(file, out.data() + old, static_cast<unsigned>(kChunk));
    out.resize(old + static_cast<size_t>(std::max(n, 0)));
  } while (n > 0);
  // A stream cut short is reported by gzread as a short read plus an error.
  int errnum = 0;
  std::string msg = gzerror(file, &errnum);
  gzclose(file);
  if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END))
    TS_THROW("corrupt gzip data in Fashion-MNIST file '", path, "': ", msg);
  return out;
}

uint32_t read_be32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) |
         uint32_t{b[at + 3]};
}

std::string hex(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s.push_back(digits[(v >> shift) & 0xF]);
  return s;
}

// Checks the IDX header (magic + dims) and returns the dims.
std::vector<int64_t> parse_idx_header(const std::vector<uint8_t>& b, const std::string& path,
                                      uint32_t magic, int ndims) {
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (b.size() < header)
    TS_THROW("Fashion-MNIST file '", path, "' is truncated: expected an IDX header of ", header,
             " bytes, found ", b.size(), " bytes");
  uint32_t found = read_be32(b, 0);
  if (found != magic)
    TS_THROW("Fashion-MNIST file '", path, "' has wrong IDX magic: expected ", hex(magic),
             ", found ", hex(found));
  std::vector<int64_t> dims;
  int64_t elements = 1;
  for (int i = 0; i < ndims; ++i) {
    dims.push_back(read_be32(b, 4 + 4 * i));
    // Bound the product before forming it, so corrupt dims cannot overflow.
    if (dims.back() != 0 && elements > (int64_t{1} << 40) / dims.back())
      TS_THROW("Fashion-MNIST file '", path, "' declares implausible dims (element count > 2^40)");
    elements *= dims.back();
  }
  if (b.size() != header + static_cast<size_t>(elements))
    TS_THROW("Fashion-MNIST file '", path, "' has wrong size: expected ", header + elements,
             " bytes (header + ", elements, " elements), found ", b.size(), " bytes");
  return dims;
}

}  // namespace

ImageDataset load_fashion_mnist(const std::string& split, const std::string& dir) {
  if (split != "train" && split != "test")
    TS_THROW("Fashion-MNIST split must be \"train\" or \"test\", got \"", split, "\"");
  const std::string prefix = split == "train" ? "train" : "t10k";
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    TS_THROW("Fashion-MNIST directory '", dir,
             "' is missing; install it with `apt-get install dataset-fashion-mnist`");
  const std::string images_path = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = dir + "/" + prefix + "-labels-idx1-ubyte.gz";

  std::vector<uint8_t> image_bytes = read_gz(images_path);
  std::vector<int64_t> idims = parse_idx_header(image_bytes, images_path, kImagesMagic, 3);
  std::vector<uint8_t> label_bytes = read_gz(labels_path);
  std::vector<int64_t> ldims = parse_idx_header(label_bytes, labels_path, kLabelsMagic, 1);
  if (ldims[0] != idims[0])
    TS_THROW("Fashion-MNIST label file '", labels_path, "' has ", ldims[0],
             " labels but image file '", images_path, "' has ", idims[0], " images");

  ImageDataset d{idims[0], idims[1], idims[2], {}, {}};
  const size_t n = static_cast<size_t>(d.count * d.rows * d.cols);
  d.pixels.resize(n);
  const uint8_t* src = image_bytes.data() + 16;
  const float scale = 1.0f / (255.0f * kFashionMnistStd);
  const float shift = kFashionMnistMean / kFashionMnistStd;
  for (size_t i = 0; i < n; ++i) d.pixels[i] = static_cast<float>(src[i]) * scale - shift;
  d.labels.resize(static_cast<size_t>(d.count));
  for (int64_t i = 0; i < d.count; ++i) {
    uint8_t label = label_bytes[8 + i];
    if (label >= kFashionMnistClasses)
      TS_THROW("Fashion-MNIST label file '", labels_path, "': label ", int{label}, " at index ", i,
               " is outside [0, ", kFashionMnistClasses, ")");
    d.labels[i] = label;
  }
  return d;
}

void sample_image_batch(const ImageDataset& d, uint64_t seed, int64_t step, int64_t row_begin,
                        int64_t row_end, float* images, int32_t* labels) {
  if (d.count <= 0) TS_THROW("sample_image_batch: dataset is empty");
  if (step < 0) TS_THROW("sample_image_batch: step must be non-negative, got ", step);
  if (row_begin < 0 || row_end < row_begin)
    TS_THROW("sample_image_batch: invalid row range [", row_begin, ", ", row_end, ")");
  if (row_end > static_cast<int64_t>(std::numeric_limits<uint32_t>::max()))
    TS_THROW("sample_image_batch: row ", row_end - 1,
             " exceeds the 2^32 rows a sampler lane can address");
  const int64_t pixels = d.rows * d.cols;
  const PhiloxStream stream(seed, "image_batch");
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint64_t index = stream.below(static_cast<uint64_t>(d.count), static_cast<uint64_t>(step),
                                        static_cast<uint32_t>(r));
    std::copy_n(d.pixels.data() + index * pixels, pixels, images + (r - row_begin) * pixels);
    labels[r - row_begin] = d.labels[index];
  }
}

}  // namespace tessel
