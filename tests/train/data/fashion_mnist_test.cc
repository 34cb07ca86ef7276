#include "tessel/train/data/fashion_mnist.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "tessel/base/error.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

class FashionTempDir {
 public:
  explicit FashionTempDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("tessel_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~FashionTempDir() { fs::remove_all(path_); }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void put_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(v >> shift));
}

std::vector<uint8_t> idx_images(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
                                size_t pixel_bytes) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  put_be32(b, count);
  put_be32(b, rows);
  put_be32(b, cols);
  for (size_t i = 0; i < pixel_bytes; ++i) b.push_back(static_cast<uint8_t>(i * 37));
  return b;
}

std::vector<uint8_t> idx_labels(uint32_t magic, uint32_t count, size_t label_bytes) {
  std::vector<uint8_t> b;
  put_be32(b, magic);
  put_be32(b, count);
  for (size_t i = 0; i < label_bytes; ++i) b.push_back(static_cast<uint8_t>(i % 10));
  return b;
}

void write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

// Writes a consistent tiny "train" split of `count` 2x3 images.
void write_tiny_split(const FashionTempDir& dir, uint32_t count) {
  write_gz(dir.file("train-images-idx3-ubyte.gz"), idx_images(0x803, count, 2, 3, count * 6));
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx_labels(0x801, count, count));
}

TEST(DataFashionMnist, LoadsBothSplits) {
  if (!fs::is_directory(kFashionDir))
    GTEST_SKIP() << "package `dataset-fashion-mnist` not installed (" << kFashionDir << " absent)";
  for (const auto& [split, count] :
       {std::pair<std::string, int64_t>{"train", 60000}, {"test", 10000}}) {
    ImageDataset d = load_fashion_mnist(split);
    EXPECT_EQ(d.count, count) << split;
    EXPECT_EQ(d.rows, 28);
    EXPECT_EQ(d.cols, 28);
    ASSERT_EQ(d.pixels.size(), static_cast<size_t>(count * 28 * 28));
    ASSERT_EQ(d.labels.size(), static_cast<size_t>(count));
    std::vector<int64_t> per_class(10, 0);
    for (int32_t label : d.labels) {
      ASSERT_GE(label, 0);
      ASSERT_LT(label, 10);
      ++per_class[label];
    }
    for (int64_t c : per_class) EXPECT_EQ(c, count / 10) << split;  // Balanced classes.
    double sum = 0, sum_sq = 0;
    for (float p : d.pixels) {
      sum += p;
      sum_sq += double{p} * p;
    }
    const double mean = sum / d.pixels.size();
    const double sd = std::sqrt(sum_sq / d.pixels.size() - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.02) << split;
    EXPECT_NEAR(sd, 1.0, 0.02) << split;
    EXPECT_FLOAT_EQ(*std::min_element(d.pixels.begin(), d.pixels.end()), -0.2860f / 0.3530f);
  }
}

TEST(DataFashionMnist, MissingDatasetNamesThePackage) {
  FashionTempDir dir("fmnist_missing");
  std::string msg = error_of([&] { load_fashion_mnist("train", dir.file("absent")); });
  EXPECT_NE(msg.find("apt-get install dataset-fashion-mnist"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir.file("absent")), std::string::npos) << msg;
  msg = error_of([&] { load_fashion_mnist("test", dir.path()); });
  EXPECT_NE(msg.find("dataset-fashion-mnist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("t10k-images-idx3-ubyte.gz"), std::string::npos) << msg;
  msg = error_of([&] { load_fashion_mnist("validation", dir.path()); });
  EXPECT_NE(msg.find("validation"), std::string::npos) << msg;
}

TEST(DataFashionMnist, TinySplitLoadsAndNormalises) {
  FashionTempDir dir("fmnist_tiny");
  write_tiny_split(dir, 5);
  ImageDataset d = load_fashion_mnist("train", dir.path());
  EXPECT_EQ(d.count, 5);
  EXPECT_EQ(d.rows, 2);
  EXPECT_EQ(d.cols, 3);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  const uint8_t raw = static_cast<uint8_t>(7 * 37);
  EXPECT_NEAR(d.pixels[7], (raw / 255.0 - 0.2860) / 0.3530, 1e-5);
}

TEST(DataFashionMnist, CorruptFilesAreRejected) {
  FashionTempDir dir("fmnist_corrupt");
  const std::string images = dir.file("train-images-idx3-ubyte.gz");
  const std::string labels = dir.file("train-labels-idx1-ubyte.gz");
  auto load = [&] { return error_of([&] { load_fashion_mnist("train", dir.path()); }); };

  write_tiny_split(dir, 4);
  write_gz(images, idx_images(0x801, 4, 2, 3, 24));  // Label magic on an image file.
  std::string msg = load();
  EXPECT_NE(msg.find("magic"), std::string::npos) << msg;
  EXPECT_NE(msg.find("0x00000803"), std::string::npos) << msg;
  EXPECT_NE(msg.find(images), std::string::npos) << msg;

  write_gz(images, idx_images(0x803, 4, 2, 3, 20));  // 4 bytes short.
  msg = load();
  EXPECT_NE(msg.find("expected 40 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("found 36"), std::string::npos) << msg;

  write_gz(images, {0, 0, 8});  // Shorter than the header.
  msg = load();
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  write_tiny_split(dir, 4);
  write_gz(labels, idx_labels(0x801, 3, 3));  // Label count != image count.
  msg = load();
  EXPECT_NE(msg.find("3 labels"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 images"), std::string::npos) << msg;

  std::vector<uint8_t> bad_label = idx_labels(0x801, 4, 4);
  bad_label.back() = 12;
  write_gz(labels, bad_label);
  msg = load();
  EXPECT_NE(msg.find("label 12"), std::string::npos) << msg;

  // A gzip stream cut in half.
  write_tiny_split(dir, 400);
  std::ifstream in(images, std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  std::ofstream(images, std::ios::binary | std::ios::trunc) << gz.substr(0, gz.size() / 2);
  msg = load();
  EXPECT_NE(msg.find(images), std::string::npos) << msg;
  EXPECT_NE(msg, "<no error>");
}

TEST(DataFashionMnist, SamplingIsDeterministicAndShardConsistent) {
  ImageDataset d;
  d.count = 50;
  d.rows = 2;
  d.cols = 2;
  for (int i = 0; i < 200; ++i) d.pixels.push_back(static_cast<float>(i));
  for (int i = 0; i < 50; ++i) d.labels.push_back(i % 10);
  std::vector<float> img(8 * 4), img2(8 * 4);
  std::vector<int32_t> lab(8), lab2(8);
  sample_image_batch(d, 5, 3, 0, 8, img.data(), lab.data());
  sample_image_batch(d, 5, 3, 0, 4, img2.data(), lab2.data());
  sample_image_batch(d, 5, 3, 4, 8, img2.data() + 16, lab2.data() + 4);
  EXPECT_EQ(img, img2);
  EXPECT_EQ(lab, lab2);
  for (int r = 0; r < 8; ++r) {
    const int example = static_cast<int>(img[r * 4]) / 4;
    EXPECT_EQ(lab[r], example % 10);
    for (int p = 0; p < 4; ++p) EXPECT_EQ(img[r * 4 + p], example * 4 + p);
  }
  sample_image_batch(d, 5, 4, 0, 8, img2.data(), lab2.data());
  EXPECT_NE(img, img2);
}

}  // namespace
}  // namespace tessel
