#include "mixer.h"

#include <tessel/tessel.h>

#include <cmath>
#include <string>

namespace mixer {
namespace {

using tessel::Dim;
using tessel::GraphBuilder;
using tessel::ParamInit;
using tessel::Shape;
using tessel::ValueId;

constexpr int64_t kSide = 28, kClasses = 10;

struct Sizes {
  Dim batch, patch, channel, token_hidden, hidden, cls;
};

ParamInit fan_in(int64_t n) { return {ParamInit::kNormal, 1.0f / std::sqrt(float(n))}; }
const ParamInit kZeros{ParamInit::kZeros}, kOnes{ParamInit::kOnes};

ValueId norm(GraphBuilder& b, const Sizes& d, ValueId x, const char* name) {
  GraphBuilder::Scope scope(b, name);
  return b.layernorm(x, b.param("gamma", Shape{d.channel}, kOnes),
                     b.param("beta", Shape{d.channel}, kZeros), "channel");
}

// An MLP over `over` (patch or channel) through `width`: two einsums, GELU.
ValueId mlp(GraphBuilder& b, const Sizes& d, ValueId x, const Dim& over, const Dim& width,
            const char* name) {
  GraphBuilder::Scope scope(b, name);
  ValueId w1 = b.param("w1", Shape{over, width}, fan_in(over.size));
  ValueId b1 = b.param("b1", Shape{width}, kZeros);
  ValueId w2 = b.param("w2", Shape{width, over}, fan_in(width.size));
  ValueId b2 = b.param("b2", Shape{over}, kZeros);
  const std::string other = over.name == "patch" ? "channel" : "patch";
  ValueId h = b.bias_gelu(b.einsum(x, w1, {"batch", other, width.name}, "fc1"), b1, "act");
  return b.add(b.einsum(h, w2, {"batch", "patch", "channel"}, "fc2"), b2, "fc2_bias");
}

tessel::TaskGraph build(const tessel::TrainConfig& c, GraphBuilder& b, int64_t batch, bool) {
  const auto p = tessel::model_option<int64_t>(c, "patch");
  if (p <= 0 || kSide % p != 0)
    throw tessel::Error("config: model_options 'patch' of model \"mixer\" must divide 28, got " +
                        std::to_string(p));
  const int64_t grid = kSide / p;
  const Sizes d{{"batch", batch},
                {"patch", grid * grid},
                {"channel", tessel::model_option<int64_t>(c, "channels")},
                {"token_hidden", tessel::model_option<int64_t>(c, "token_hidden")},
                {"hidden", tessel::model_option<int64_t>(c, "hidden")},
                {"class", kClasses}};
  // The inputs DataKind::kImages fills: 784 pixels per row, row-major, and a label.
  ValueId images = b.input("images", Shape{d.batch, {"pixel", kSide * kSide}});
  ValueId labels = b.input("labels", Shape{d.batch}, tessel::DType::kI32);

  // Pixel (r, c) = (prow*p + py, pcol*p + px): one einsum projects each patch.
  ValueId pixels =
      b.split_dim(images, "pixel", Shape{{"prow", grid}, {"py", p}, {"pcol", grid}, {"px", p}});
  ValueId w_stem = b.param("stem.w", Shape{{"py", p}, {"px", p}, d.channel}, fan_in(p * p));
  ValueId stem = b.einsum(pixels, w_stem, {"batch", "prow", "pcol", "channel"}, "stem");
  ValueId x = b.add(b.merge_dims(stem, {"prow", "pcol"}, "patch", "patches"),
                    b.param("stem.b", Shape{d.channel}, kZeros), "stem_bias");

  const auto blocks = tessel::model_option<int64_t>(c, "blocks");
  for (int64_t i = 0; i < blocks; ++i) {
    GraphBuilder::Scope scope(b, "block" + std::to_string(i));  // the block label convention
    x = b.add(x, mlp(b, d, norm(b, d, x, "ln1"), d.patch, d.token_hidden, "token_mix"),
              "token_residual");
    x = b.add(x, mlp(b, d, norm(b, d, x, "ln2"), d.channel, d.hidden, "channel_mix"),
              "channel_residual");
  }
  ValueId pooled = b.reduce_mean(norm(b, d, x, "ln_f"), {"patch"}, "pool");
  ValueId logits =
      b.add(b.einsum(pooled, b.param("head.w", Shape{d.channel, d.cls}, fan_in(d.channel.size)),
                     {"batch", "class"}, "head"),
            b.param("head.b", Shape{d.cls}, kZeros), "head_bias");
  return {b.cross_entropy(logits, labels, "class", "loss"), logits};
}

}  // namespace

void register_mixer() {
  tessel::ModelSpec spec;
  spec.build = build;
  spec.data = tessel::DataKind::kImages;
  spec.options = {
      {"patch", 7}, {"channels", 32}, {"token_hidden", 32}, {"hidden", 64}, {"blocks", 2}};
  tessel::register_model("mixer", spec);
}

}  // namespace mixer
