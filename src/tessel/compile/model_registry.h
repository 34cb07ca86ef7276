// Models by name: what `"model": NAME` in a config builds.
//
// A model builder adds the config's model to a graph for a given number of
// batch rows and returns its loss (a scalar mean) and logits. Builders need
// no data: the compile step, dry runs, inspect and the planner build graphs
// for any config offline. "gpt" and "mlp" are registered here; other
// programs (the user's own trainer, docs/library.md) register their own names
// before building, and every path — train, dry run, inspect, plan — finds
// them here.
//
// A registration also says which data feeds the model (DataKind: the inputs
// the trainer fills) and which keys of its own the model reads from the
// config's "model_options" object, with their defaults. Invariant: after
// build_model returns, the graph's inputs are exactly the ones the data kind
// fills, with the dtypes and element counts it writes (checked, naming the
// model and the input), so the trainer never writes past a model's input.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/base/rotary_frequencies.h"
#include "tessel/compile/config.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"

namespace tessel {

using ModelBuilder = std::function<TaskGraph(const TrainConfig& config, GraphBuilder& b,
                                             int64_t batch, bool training)>;

// What the trainer feeds a model (train/task.h), by the inputs it fills:
//   kText:   "tokens" and "targets", i32, batch x context elements each
//            (the GPT's (batch, seq)); 'data' "fortunes" (the text in 'data_dir').
//   kImages: "images", f32, batch x 784 elements (28x28 pixels, row-major),
//            and "labels", i32, batch elements; 'data' "fashion-mnist".
enum class DataKind { kText, kImages };

// The 'data' value a kind reads ("fortunes", "fashion-mnist") and back.
const char* data_name(DataKind kind);
DataKind data_kind_of(const std::string& data);  // throws naming the value

struct ModelSpec {
  ModelBuilder build;
  // The data the model trains on; empty: whatever the config's 'data' names.
  std::optional<DataKind> data;
  // The model's own config keys, read from "model_options", with their
  // defaults (a JSON object). A key the config sets that is not listed here,
  // or of another JSON type, is an error naming the key and the model.
  nlohmann::json options = nlohmann::json::object();
};

// Registers (or replaces) the model `name`.
void register_model(const std::string& name, ModelSpec spec);
// Registers (or replaces) the builder for `name`; its data is whatever the
// config's 'data' names, and it takes no model options.
void register_model(const std::string& name, ModelBuilder builder);
bool model_registered(const std::string& name);
std::vector<std::string> registered_models();

// The data kind that feeds the config's model: the model's own, else the
// config's 'data'. Throws for an unknown model.
DataKind model_data_kind(const TrainConfig& config);

// The config's model for `batch` rows (`training` enables dropout); throws
// naming the model and the registered ones when `config.model` is unknown,
// and naming the input when the graph's inputs are not what its data kind fills.
TaskGraph build_model(const TrainConfig& config, GraphBuilder& b, int64_t batch, bool training);

// Throws the unknown-model error build_model throws.
[[noreturn]] void build_model_error(const std::string& name);

// Checks the config's "model_options" against the model's registered keys
// (names and JSON types); throws naming the key and the model.
void check_model_options(const TrainConfig& config);

// A model option: the config's "model_options" value for `key`, else the
// registered default; throws naming the key and the model when the model has
// no such key or the value does not convert to T.
const nlohmann::json& model_option_json(const TrainConfig& config, const std::string& key);
template <typename T>
T model_option(const TrainConfig& config, const std::string& key) {
  const nlohmann::json& v = model_option_json(config, key);
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    TS_THROW("config: model_options '", key, "' of model \"", config.model, "\" has value ",
             v.dump(), " of the wrong type");
  }
}

// The built-in transformers ("gpt", "llama"): n_layer blocks labelled
// blockN, sized by the config's n_layer, n_head, d_model, context and vocab.
bool is_builtin_transformer(const std::string& model);
// The dim a built-in transformer's tensor parallelism splits: "kv_heads"
// for llama (its query groups follow their key/value head), else "heads".
std::string heads_dim_of(const std::string& model);

struct GptConfig;
GptConfig gpt_config(const TrainConfig& config);
struct LlamaConfig;
LlamaConfig llama_config(const TrainConfig& config);
// The config's 'rope_scaling' object; throws naming the key at fault.
RotaryScaling llama_rope_scaling(const TrainConfig& config);

}  // namespace tessel
