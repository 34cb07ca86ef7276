// The small GPT that unit tests build graphs and programs from: 2 heads,
// d_model 32, context 16; blocks and batch rows as the test needs.
#pragma once

#include <cstdint>

#include "tessel/compile/config.h"

namespace tessel {

inline TrainConfig tiny_gpt_config(int64_t layers, int64_t batch) {
  TrainConfig c;
  c.n_layer = layers;
  c.n_head = 2;
  c.d_model = 32;
  c.context = 16;
  c.batch = batch;
  return c;
}

}  // namespace tessel
