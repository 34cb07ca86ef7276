#include "tessel/compile/config_limits.h"

#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "tessel/base/checked_math.h"
#include "tessel/base/error.h"
#include "tessel/compile/model_registry.h"

namespace tessel {
namespace {

// One tensor, or all parameters, of a run (plans only need the products not
// to overflow: their tensors are never allocated).
constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr int64_t kMaxPlanElements = int64_t{1} << 56;
constexpr int64_t kMaxLayers = 1024;  // the memory planner is quadratic in graph size

// The product of named config values, checked against kMaxElements.
void check_product(const std::string& what, const std::vector<std::pair<const char*, int64_t>>& f,
                   int64_t limit) {
  std::string keys;
  int64_t n = 1;
  for (const auto& [key, value] : f) {
    keys += (keys.empty() ? "" : " x ") + str_cat(key, "=", value);
    n = checked_mul(n, value, str_cat("config: ", what, " (", keys, ")"));
  }
  if (n > limit)
    TS_THROW("config: ", what, " (", keys, ") is ", n, " elements, over the limit of 2^",
             limit == kMaxElements ? 40 : 56);
}

}  // namespace

void check_config_sizes(const TrainConfig& c, bool runs) {
  const int64_t limit = runs ? kMaxElements : kMaxPlanElements;
  for (const auto& [key, value] :
       std::vector<std::pair<const char*, int64_t>>{{"batch", c.batch},
                                                    {"n_layer", c.n_layer},
                                                    {"n_head", c.n_head},
                                                    {"d_model", c.d_model},
                                                    {"context", c.context},
                                                    {"vocab", c.vocab},
                                                    {"hidden", c.hidden},
                                                    {"n_kv_head", c.n_kv_head},
                                                    {"multiple_of", c.multiple_of},
                                                    {"microbatches", c.microbatches},
                                                    {"chunks", c.chunks},
                                                    {"eval_batches", c.eval_batches}})
    if (value > INT_MAX)
      TS_THROW("config: '", key, "' is ", value, ", over the limit of ", INT_MAX);
  if (is_builtin_transformer(c.model)) {
    if (c.n_layer > kMaxLayers)
      TS_THROW("config: 'n_layer' is ", c.n_layer, ", over the limit of ", kMaxLayers,
               " blocks (the graph would take too long to build)");
    const int64_t d = c.d_model, bt = c.batch;
    check_product("the MLP weight 4*d_model x d_model", {{"4", 4}, {"d_model", d}, {"d_model", d}},
                  limit);
    check_product("the parameters, about 12*d_model^2 per block",
                  {{"12", 12}, {"d_model", d}, {"d_model", d}, {"n_layer", c.n_layer}}, limit);
    check_product("the embedding vocab x d_model", {{"vocab", c.vocab}, {"d_model", d}}, limit);
    check_product("the MLP activation batch x context x 4*d_model",
                  {{"batch", bt}, {"context", c.context}, {"4", 4}, {"d_model", d}}, limit);
    if (c.attention == "unfused")  // the fused op never forms the scores
      check_product(
          "the attention scores batch x n_head x context x context",
          {{"batch", bt}, {"n_head", c.n_head}, {"context", c.context}, {"context", c.context}},
          limit);
    check_product("the logits batch x context x vocab",
                  {{"batch", bt}, {"context", c.context}, {"vocab", c.vocab}}, limit);
  } else if (c.model == "mlp") {
    check_product("the hidden layer batch x hidden", {{"batch", c.batch}, {"hidden", c.hidden}},
                  limit);
    check_product("the weight 784 x hidden", {{"784", 784}, {"hidden", c.hidden}}, limit);
  }
}

}  // namespace tessel
