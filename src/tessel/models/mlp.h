// MLP classifier: image (batch, pixel) -> hidden (ReLU) -> class logits.
//
// Dims: batch, pixel, hidden, class. Parameters w1, b1, w2, b2.
#pragma once

#include <cstdint>

#include "tessel/ir/builder.h"

namespace tessel {

struct MlpConfig {
  int64_t pixels = 784, hidden = 1024, classes = 10;
};

struct MlpGraph {
  ValueId images;  // input (batch, pixel) f32
  ValueId labels;  // input (batch) i32
  ValueId logits;  // (batch, class)
  ValueId loss;    // scalar mean cross-entropy
};

MlpGraph build_mlp(GraphBuilder& b, const MlpConfig& config, int64_t batch);

}  // namespace tessel
