#include "tessel/train/checkpoint/config_drift.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <sstream>

#include "tessel/base/error.h"

namespace tessel {
namespace {

// How and where a run executes: a checkpoint resumes under any of these
// (docs/checkpoints.md, "Resuming on another layout"). Each must be a key.
const std::set<std::string>& execution_keys() {
  static const std::set<std::string> keys = [] {
    std::istringstream list(
        "async_save attention bucket_mib checkpoint_every chunks collectives context_parallel "
        "device eval_batches eval_every grad_reduce_precision keep_checkpoints layout loss "
        "memory_limit mesh microbatches offload recompute sample_chars sample_prompt schedule "
        "shard stages staging_mib threads tp_comm_precision trace zero");
    std::set<std::string> out{std::istream_iterator<std::string>(list), {}};
    const std::vector<std::string> known = TrainConfig::known_keys();
    for (const std::string& key : out)
      TS_CHECK(std::find(known.begin(), known.end(), key) != known.end(), "config_drift: '", key,
               "' is not a config key");
    return out;
  }();
  return keys;
}

}  // namespace

std::vector<std::string> config_drift(const TrainConfig& saved, const TrainConfig& resumed) {
  const nlohmann::json before = saved.to_json(), after = resumed.to_json();
  std::vector<std::string> changes;
  for (const std::string& key : TrainConfig::known_keys()) {
    if (execution_keys().count(key) > 0) continue;
    const nlohmann::json old_value = before.value(key, nlohmann::json());
    const nlohmann::json new_value = after.value(key, nlohmann::json());
    if (old_value != new_value)
      changes.push_back(key + " " + old_value.dump() + " -> " + new_value.dump());
  }
  return changes;
}

}  // namespace tessel
