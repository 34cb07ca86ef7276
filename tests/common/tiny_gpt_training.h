// The small GPT's training graph (tiny_gpt_config(2, 2)): forward, loss and
// backward in one graph, for tests that compile it into a Program
// themselves. `outputs` are the loss, then every parameter's gradient in
// params() order; nodes from `backward_start` on are the backward.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/tiny_gpt.h"
#include "tessel/autodiff/backward.h"
#include "tessel/ir/builder.h"
#include "tessel/train/task.h"

namespace tessel {

struct TinyGptTraining {
  Graph graph;
  std::vector<ValueId> outputs;  // loss, then gradients
  ValueId backward_start = 0;
};

inline TinyGptTraining tiny_gpt_training(const std::string& attention = "fused") {
  TrainConfig c = tiny_gpt_config(2, 2);
  c.attention = attention;
  TinyGptTraining t;
  GraphBuilder b(t.graph);
  TaskGraph out = build_model(c, b, c.batch, /*training=*/true);
  t.backward_start = t.graph.size();
  std::map<ValueId, ValueId> grads = build_backward(b, out.loss, t.graph.params());
  t.outputs.push_back(out.loss);
  for (ValueId p : t.graph.params()) t.outputs.push_back(grads.at(p));
  return t;
}

}  // namespace tessel
