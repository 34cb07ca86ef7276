// The model registry as a user program sees it (compile/model_registry.h):
// a model registered with its data kind and options trains through the
// ordinary Trainer, its options are checked by name and type, its inputs are
// checked against what the data fills, and a mismatched 'data' is refused —
// each error naming the model and the key or input.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error_of.h"
#include "tessel/tessel.h"

namespace tessel {
namespace {

// Logistic regression on the images, one option: a scale on the logits.
TaskGraph linear_images(const TrainConfig& c, GraphBuilder& b, int64_t batch, bool) {
  const Dim rows{"batch", batch}, pixel{"pixel", 784}, cls{"class", 10};
  ValueId images = b.input("images", Shape{rows, pixel});
  ValueId labels = b.input("labels", Shape{rows}, DType::kI32);
  ValueId w = b.param("w", Shape{pixel, cls}, ParamInit{ParamInit::kNormal, 0.01f});
  ValueId logits = b.scale(b.einsum(images, w, {"batch", "class"}, "fc"),
                           static_cast<float>(model_option<double>(c, "logit_scale")), "scaled");
  return {b.cross_entropy(logits, labels, "class", "loss"), logits};
}

void register_test_models() {
  register_model("test_linear", ModelSpec{linear_images, DataKind::kImages,
                                          nlohmann::json{{"logit_scale", 1.0}, {"width", 4}}});
  // Reads too few pixels: the image data would overrun its input.
  register_model("test_small_images",
                 ModelSpec{[](const TrainConfig&, GraphBuilder& b, int64_t batch, bool) {
                             ValueId x = b.input("images", Shape{{"batch", batch}, {"pixel", 10}});
                             b.input("labels", Shape{{"batch", batch}}, DType::kI32);
                             return TaskGraph{b.reduce_sum(x, {"batch", "pixel"}), std::nullopt};
                           },
                           DataKind::kImages});
  // Registered without a data kind: the config's 'data' decides (text here).
  register_model("test_text", [](const TrainConfig& c, GraphBuilder& b, int64_t batch, bool) {
    const Shape s{{"batch", batch}, {"seq", c.context}};
    ValueId tokens = b.input("tokens", s, DType::kI32);
    ValueId targets = b.input("targets", s, DType::kI32);
    ValueId wte = b.param("wte", Shape{{"vocab", 256}, {"embed", 8}});
    ValueId logits = b.einsum(b.embedding(wte, tokens, "vocab"), wte, {"batch", "seq", "vocab"});
    return TaskGraph{b.cross_entropy(logits, targets, "vocab"), logits};
  });
}

TrainConfig config_for(const std::string& model) {
  register_test_models();
  TrainConfig c;
  c.model = model;
  c.data = "fashion-mnist";
  c.batch = 8;
  c.context = 16;
  return c;
}

TEST(ModelRegistry, CustomModelsAreListedAndUnknownOnesNamed) {
  TrainConfig c = config_for("test_linear");
  EXPECT_TRUE(model_registered("test_linear"));
  c.model = "nope";
  const std::string msg = error_of([&] { c.validate(); });
  EXPECT_NE(msg.find("'model' \"nope\" is not a registered model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"test_linear\""), std::string::npos) << msg;
}

TEST(ModelRegistry, OptionsHaveDefaultsAndAreCheckedByNameAndType) {
  TrainConfig c = config_for("test_linear");
  EXPECT_EQ(model_option<double>(c, "logit_scale"), 1.0);
  c.set("model_options={\"logit_scale\": 0.5}");
  c.validate(false);
  EXPECT_EQ(model_option<double>(c, "logit_scale"), 0.5);
  EXPECT_EQ(model_option<int64_t>(c, "width"), 4);  // the default, not set

  c.set("model_options={\"logit_scal\": 0.5}");
  std::string msg = error_of([&] { c.validate(false); });
  EXPECT_NE(msg.find("model_options 'logit_scal' is not an option of model \"test_linear\" (it "
                     "has 'logit_scale', 'width')"),
            std::string::npos)
      << msg;
  c.set("model_options={\"width\": 2.5}");
  msg = error_of([&] { c.validate(false); });
  EXPECT_NE(msg.find("model_options 'width' of model \"test_linear\" has value 2.5 of the wrong "
                     "type (expected number, like the default 4)"),
            std::string::npos)
      << msg;
  c.set("model_options=3");
  msg = error_of([&] { c.validate(false); });
  EXPECT_NE(msg.find("'model_options' must be a JSON object"), std::string::npos) << msg;
  c.model_options = nlohmann::json::object();
  msg = error_of([&] { model_option<double>(c, "depth"); });
  EXPECT_NE(
      msg.find("model \"test_linear\" reads model_options 'depth', which it did not register"),
      std::string::npos)
      << msg;
}

TEST(ModelRegistry, DataMustMatchTheRegisteredKind) {
  TrainConfig c = config_for("test_linear");
  c.data = "fortunes";
  const std::string msg = error_of([&] { c.validate(); });
  EXPECT_NE(msg.find("model \"test_linear\" classifies images; 'data' must be \"fashion-mnist\", "
                     "got \"fortunes\""),
            std::string::npos)
      << msg;
  c.validate(/*with_data=*/false);  // plans and dry runs need no data
  EXPECT_EQ(model_data_kind(c), DataKind::kImages);
  c.model = "test_text";
  EXPECT_EQ(model_data_kind(c), DataKind::kText);  // from 'data'
}

TEST(ModelRegistry, InputsAreCheckedAgainstWhatTheDataFills) {
  TrainConfig c = config_for("test_small_images");
  Graph g;
  GraphBuilder b(g);
  std::string msg = error_of([&] { build_model(c, b, 8, true); });
  EXPECT_NE(msg.find("model \"test_small_images\": input 'images' is f32"), std::string::npos)
      << msg;
  EXPECT_NE(
      msg.find("(80 elements), but fashion-mnist data fills f32 with 6272 elements for 8 rows"),
      std::string::npos)
      << msg;
  // A text model on image data lacks the image inputs.
  c.model = "test_text";
  Graph g2;
  GraphBuilder b2(g2);
  msg = error_of([&] { build_model(c, b2, 8, true); });
  EXPECT_NE(msg.find("model \"test_text\" has no input 'images': fashion-mnist data fills the "
                     "inputs 'images', 'labels'"),
            std::string::npos)
      << msg;
  c.data = "fortunes";
  Graph g3;
  GraphBuilder b3(g3);
  build_model(c, b3, 8, true);  // text data: its inputs fit
}

TEST(ModelRegistry, CustomImageModelTrainsThroughTheTrainer) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist"))
    GTEST_SKIP() << "package `dataset-fashion-mnist` not installed";
  TrainConfig c = config_for("test_linear");
  c.batch = 32;
  c.steps = 40;
  c.lr = 1e-2;
  c.warmup_steps = 0;
  c.threads = 2;
  c.eval_batches = 4;
  Trainer trainer(c);
  const double first = trainer.step().loss;
  for (int64_t s = 1; s < c.steps; ++s) trainer.step();
  const EvalResult val = trainer.evaluate();
  EXPECT_NEAR(trainer.task().baseline_loss(), std::log(10.0),
              1e-12);  // chance, from the image task
  EXPECT_LT(val.loss, first - 0.5) << "first " << first << ", validation " << val.loss;
  ASSERT_TRUE(val.accuracy.has_value());
  EXPECT_GT(*val.accuracy, 0.5);  // the task's accuracy reads this model's logits
}

}  // namespace
}  // namespace tessel
