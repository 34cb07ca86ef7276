// Models by name: what `"model": NAME` in a config builds.
//
// A model builder adds the config's model to a graph for a given number of
// batch rows and returns its loss (a scalar mean) and logits. Builders need
// no data: the compile step, dry runs, inspect and the planner build graphs
// for any config offline. "gpt" and "mlp" are registered here; other
// programs may register their own names before building.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessel/compile/config.h"
#include "tessel/ir/builder.h"

namespace tessel {

struct TaskGraph {
  ValueId loss;
  ValueId logits;  // -1 when the model has none
};

using ModelBuilder = std::function<TaskGraph(const TrainConfig& config, GraphBuilder& b,
                                             int64_t batch, bool training)>;

// Registers (or replaces) the builder for `name`.
void register_model(const std::string& name, ModelBuilder builder);
bool model_registered(const std::string& name);
std::vector<std::string> registered_models();

// The config's model for `batch` rows (`training` enables dropout); throws
// naming the model and the registered ones when `config.model` is unknown.
TaskGraph build_model(const TrainConfig& config, GraphBuilder& b, int64_t batch, bool training);

// Throws the unknown-model error build_model throws.
[[noreturn]] void build_model_error(const std::string& name);

struct GptConfig;
GptConfig gpt_config(const TrainConfig& config);

}  // namespace tessel
