// Fashion-MNIST images (Debian package `dataset-fashion-mnist`).
//
// An ImageDataset holds `count` greyscale images of rows x cols pixels,
// row-major, normalised as (x/255 - 0.2860) / 0.3530 (the training-set mean
// and standard deviation), and one label in [0, 10) per image. Batches are
// counter-based: row r at step s is a pure function of (seed, s, r).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

struct ImageDataset {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<float> pixels;    // count * rows * cols, normalised.
  std::vector<int32_t> labels;  // count, each in [0, 10).
};

inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;
inline constexpr int32_t kFashionMnistClasses = 10;

// Reads `<prefix>-images-idx3-ubyte.gz` and `<prefix>-labels-idx1-ubyte.gz`
// from `dir`, prefix "train" for split "train" and "t10k" for split "test".
// Validates the IDX magic numbers, dimensions, byte counts, label range and
// that the label count equals the image count.
ImageDataset load_fashion_mnist(const std::string& split,
                                const std::string& dir = "/usr/share/datasets/fashion-mnist");

// Rows [row_begin, row_end) of the batch at `step`: row r is example
// PhiloxStream(seed, "image_batch").below(count, step, r), its pixels written
// at images + (r - row_begin) * rows * cols and its label at labels[r - row_begin].
void sample_image_batch(const ImageDataset& d, uint64_t seed, int64_t step, int64_t row_begin,
                        int64_t row_end, float* images, int32_t* labels);

}  // namespace tessel
