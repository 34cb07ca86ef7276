// MLP classifier: image (batch, pixel) -> hidden (ReLU) -> class logits.
//
// Dims: batch, pixel, hidden, class. Parameters w1, b1, w2, b2.
#pragma once

#include <cstdint>

#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"

namespace tessel {

struct MlpConfig {
  int64_t pixels = 784, hidden = 1024, classes = 10;
};

// Inputs images (batch, pixel) f32 and labels (batch) i32; logits (batch, class).
TaskGraph build_mlp(GraphBuilder& b, const MlpConfig& config, int64_t batch);

}  // namespace tessel
