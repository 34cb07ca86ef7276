#include "tessel/compile/model_registry.h"

#include <map>

#include "tessel/base/error.h"
#include "tessel/models/gpt.h"
#include "tessel/models/mlp.h"

namespace tessel {
namespace {

std::map<std::string, ModelBuilder>& registry() {
  static std::map<std::string, ModelBuilder> models = {
      {"gpt",
       [](const TrainConfig& c, GraphBuilder& b, int64_t batch, bool training) {
         GptGraph g = build_gpt(b, gpt_config(c), batch, training);
         return TaskGraph{g.loss, g.logits};
       }},
      {"mlp", [](const TrainConfig& c, GraphBuilder& b, int64_t batch, bool) {
         MlpGraph g =
             build_mlp(b, MlpConfig{MlpConfig{}.pixels, c.hidden, MlpConfig{}.classes}, batch);
         return TaskGraph{g.loss, g.logits};
       }}};
  return models;
}

}  // namespace

void register_model(const std::string& name, ModelBuilder builder) {
  TS_CHECK(!name.empty() && builder, "register_model: a model needs a name and a builder");
  registry()[name] = std::move(builder);
}

bool model_registered(const std::string& name) { return registry().count(name) > 0; }

std::vector<std::string> registered_models() {
  std::vector<std::string> names;
  for (const auto& [name, builder] : registry()) names.push_back(name);
  return names;
}

void build_model_error(const std::string& name) {
  std::string known;
  for (const std::string& m : registered_models())
    known += (known.empty() ? "\"" : ", \"") + m + "\"";
  TS_THROW("config: 'model' \"", name, "\" is not a registered model (known: ", known, ")");
}

GptConfig gpt_config(const TrainConfig& c) {
  return GptConfig{
      c.n_layer, c.n_head, c.d_model, c.context, c.vocab, static_cast<float>(c.dropout), c.seed};
}

TaskGraph build_model(const TrainConfig& c, GraphBuilder& b, int64_t batch, bool training) {
  auto it = registry().find(c.model);
  if (it == registry().end()) build_model_error(c.model);
  return it->second(c, b, batch, training);
}

}  // namespace tessel
