#include "tessel/models/mlp.h"

#include <cmath>

#include "tessel/ir/model_contract.h"

namespace tessel {

TaskGraph build_mlp(GraphBuilder& b, const MlpConfig& c, int64_t batch) {
  const Dim dbatch{kBatchDim, batch}, pixel{"pixel", c.pixels}, hidden{"hidden", c.hidden},
      cls{"class", c.classes};
  // He initialisation for the ReLU layer, Xavier-like for the output layer.
  const ParamInit w1_init{ParamInit::kNormal, std::sqrt(2.0f / static_cast<float>(c.pixels))};
  const ParamInit w2_init{ParamInit::kNormal, std::sqrt(1.0f / static_cast<float>(c.hidden))};
  const ParamInit zeros{ParamInit::kZeros};
  const ValueId images = b.input("images", Shape{dbatch, pixel});
  const ValueId labels = b.input("labels", Shape{dbatch}, DType::kI32);
  ValueId w1 = b.param("w1", Shape{pixel, hidden}, w1_init);
  ValueId b1 = b.param("b1", Shape{hidden}, zeros);
  ValueId w2 = b.param("w2", Shape{hidden, cls}, w2_init);
  ValueId b2 = b.param("b2", Shape{cls}, zeros);
  ValueId h = b.relu(b.add(b.einsum(images, w1, {kBatchDim, "hidden"}, "fc1"), b1, "fc1_bias"));
  const ValueId logits = b.add(b.einsum(h, w2, {kBatchDim, "class"}, "fc2"), b2, "fc2_bias");
  return TaskGraph{b.cross_entropy(logits, labels, "class", "loss"), logits};
}

}  // namespace tessel
