#include "tessel/compile/model_registry.h"

#include <map>

#include "tessel/base/error.h"
#include "tessel/models/gpt.h"
#include "tessel/models/llama.h"
#include "tessel/models/mlp.h"

namespace tessel {
namespace {

using nlohmann::json;

constexpr int64_t kImagePixels = 28 * 28;  // Fashion-MNIST

std::map<std::string, ModelSpec>& registry() {
  static std::map<std::string, ModelSpec> models = {
      {"gpt",
       {[](const TrainConfig& c, GraphBuilder& b, int64_t batch, bool training) {
          return build_gpt(b, gpt_config(c), batch, training);
        },
        DataKind::kText}},
      {"llama",
       {[](const TrainConfig& c, GraphBuilder& b, int64_t batch, bool) {
          return build_llama(b, llama_config(c), batch);
        },
        DataKind::kText}},
      {"mlp",
       {[](const TrainConfig& c, GraphBuilder& b, int64_t batch, bool) {
          return build_mlp(b, MlpConfig{MlpConfig{}.pixels, c.hidden, MlpConfig{}.classes}, batch);
        },
        DataKind::kImages}}};
  return models;
}

const ModelSpec& spec_of(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) build_model_error(name);
  return it->second;
}

struct ExpectedInput {
  const char* name;
  DType dtype;
  int64_t elements;
};

// Every input the data kind fills must be in the graph with its dtype and
// size, and the graph may have no input the trainer would leave unfilled.
void check_inputs(const TrainConfig& c, const Graph& g, DataKind kind, int64_t batch) {
  std::vector<ExpectedInput> want;
  if (kind == DataKind::kText)
    want = {{"tokens", DType::kI32, batch * c.context},
            {"targets", DType::kI32, batch * c.context}};
  else
    want = {{"images", DType::kF32, batch * kImagePixels}, {"labels", DType::kI32, batch}};
  std::string names;
  for (const ExpectedInput& e : want)
    names += (names.empty() ? "'" : ", '") + std::string(e.name) + "'";
  for (const ExpectedInput& e : want) {
    const ValueId id = g.find(e.name);
    if (id < 0 || g.node(id).kind != OpKind::kInput)
      TS_THROW("model \"", c.model, "\" has no input '", e.name, "': ", data_name(kind),
               " data fills the inputs ", names);
    const Node& n = g.node(id);
    if (n.dtype != e.dtype || n.shape.numel() != e.elements)
      TS_THROW("model \"", c.model, "\": input '", e.name, "' is ", dtype_name(n.dtype), " ",
               n.shape, " (", n.shape.numel(), " elements), but ", data_name(kind), " data fills ",
               dtype_name(e.dtype), " with ", e.elements, " elements for ", batch, " rows");
  }
  for (ValueId id : g.inputs()) {
    const std::string& name = g.node(id).name;
    bool known = false;
    for (const ExpectedInput& e : want) known = known || name == e.name;
    if (!known)
      TS_THROW("model \"", c.model, "\" has input '", name, "', which ", data_name(kind),
               " data does not fill (it fills ", names, ")");
  }
}

// An integer default takes integers, a floating-point one any number; other
// defaults (strings, booleans, arrays, objects) take their own JSON type.
bool fits_default(const json& value, const json& def) {
  if (def.is_number_float()) return value.is_number();
  if (def.is_number_integer()) return value.is_number_integer();
  return value.type() == def.type();
}

}  // namespace

const char* data_name(DataKind kind) {
  return kind == DataKind::kText ? "fortunes" : "fashion-mnist";
}

DataKind data_kind_of(const std::string& data) {
  if (data == "fortunes" || data == "tokens" || data == "synthetic") return DataKind::kText;
  if (data == "fashion-mnist") return DataKind::kImages;
  TS_THROW(
      "config: 'data' must be \"fortunes\", \"tokens\", \"synthetic\" or \"fashion-mnist\", got \"",
      data, "\"");
}

void register_model(const std::string& name, ModelSpec spec) {
  TS_CHECK(!name.empty() && spec.build, "register_model: a model needs a name and a builder");
  if (!spec.options.is_object())
    TS_THROW("register_model: the options of model \"", name,
             "\" must be a JSON object of defaults, got ", spec.options.type_name());
  registry()[name] = std::move(spec);
}

void register_model(const std::string& name, ModelBuilder builder) {
  register_model(name, ModelSpec{std::move(builder), std::nullopt, json::object()});
}

bool model_registered(const std::string& name) { return registry().count(name) > 0; }

std::vector<std::string> registered_models() {
  std::vector<std::string> names;
  for (const auto& [name, spec] : registry()) names.push_back(name);
  return names;
}

void build_model_error(const std::string& name) {
  std::string known;
  for (const std::string& m : registered_models())
    known += (known.empty() ? "\"" : ", \"") + m + "\"";
  TS_THROW("config: 'model' \"", name, "\" is not a registered model (known: ", known, ")");
}

DataKind model_data_kind(const TrainConfig& c) {
  const ModelSpec& spec = spec_of(c.model);
  return spec.data ? *spec.data : data_kind_of(c.data);
}

void check_model_options(const TrainConfig& c) {
  const ModelSpec& spec = spec_of(c.model);
  if (!c.model_options.is_object())
    TS_THROW("config: 'model_options' must be a JSON object, got ", c.model_options.dump());
  std::string known;
  for (const auto& [key, value] : spec.options.items())
    known += (known.empty() ? "'" : ", '") + key + "'";
  for (const auto& [key, value] : c.model_options.items()) {
    if (!spec.options.contains(key))
      TS_THROW("config: model_options '", key, "' is not an option of model \"", c.model, "\" (",
               known.empty() ? std::string("it has none") : "it has " + known, ")");
    const json& def = spec.options[key];
    if (!fits_default(value, def))
      TS_THROW("config: model_options '", key, "' of model \"", c.model, "\" has value ",
               value.dump(), " of the wrong type (expected ", def.type_name(),
               ", like the default ", def.dump(), ")");
  }
}

const json& model_option_json(const TrainConfig& c, const std::string& key) {
  const ModelSpec& spec = spec_of(c.model);
  if (!spec.options.contains(key))
    TS_THROW("model \"", c.model, "\" reads model_options '", key,
             "', which it did not register (register_model's ModelSpec::options)");
  if (c.model_options.is_object() && c.model_options.contains(key)) return c.model_options[key];
  return spec.options[key];
}

GptConfig gpt_config(const TrainConfig& c) {
  return GptConfig{c.n_layer,
                   c.n_head,
                   c.d_model,
                   c.context,
                   c.vocab,
                   static_cast<float>(c.dropout),
                   c.seed,
                   c.attention == "fused",
                   static_cast<float>(c.attention_dropout),
                   c.loss == "fused"};
}

bool is_builtin_transformer(const std::string& model) { return model == "gpt" || model == "llama"; }

std::string heads_dim_of(const std::string& model) {
  return model == "llama" ? "kv_heads" : "heads";
}

RotaryScaling llama_rope_scaling(const TrainConfig& c) {
  const json& j = c.rope_scaling;
  if (!j.is_object()) TS_THROW("config: 'rope_scaling' must be a JSON object, got ", j.dump());
  RotaryScaling s;
  if (j.empty()) return s;
  if (!j.contains("factor"))
    TS_THROW("config: 'rope_scaling' ", j.dump(), " needs 'factor' (Llama 3.1: 8)");
  for (const auto& [key, value] : j.items()) {
    if (key == "rope_type") {
      if (value != "llama3")
        TS_THROW("config: 'rope_scaling' rope_type must be \"llama3\", got ", value.dump());
      continue;
    }
    double* field = key == "factor"                             ? &s.factor
                    : key == "low_freq_factor"                  ? &s.low_freq_factor
                    : key == "high_freq_factor"                 ? &s.high_freq_factor
                    : key == "original_max_position_embeddings" ? &s.original_context
                                                                : nullptr;
    if (!field)
      TS_THROW("config: 'rope_scaling' has no key '", key,
               "' (it takes factor, low_freq_factor, high_freq_factor, "
               "original_max_position_embeddings, rope_type)");
    if (!value.is_number())
      TS_THROW("config: 'rope_scaling' ", key, " must be a number, got ", value.dump());
    *field = value.get<double>();
  }
  try {
    parse_rotary_scaling(rotary_scaling_text(s));
  } catch (const Error& e) {
    TS_THROW("config: 'rope_scaling' ", j.dump(), ": ", e.what());
  }
  return s;
}

LlamaConfig llama_config(const TrainConfig& c) {
  return LlamaConfig{c.n_layer,
                     c.n_head,
                     c.n_kv_head == 0 ? c.n_head : c.n_kv_head,
                     c.d_model,
                     c.context,
                     c.vocab,
                     static_cast<float>(c.rope_theta),
                     llama_rope_scaling(c),
                     c.ffn_dim_multiplier,
                     c.multiple_of,
                     static_cast<float>(c.norm_eps),
                     c.attention == "fused",
                     c.loss == "fused"};
}

TaskGraph build_model(const TrainConfig& c, GraphBuilder& b, int64_t batch, bool training) {
  TaskGraph out = spec_of(c.model).build(c, b, batch, training);
  check_inputs(c, b.graph(), model_data_kind(c), batch);
  return out;
}

}  // namespace tessel
