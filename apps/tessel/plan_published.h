// `tessel plan` on a published run (plan/published_run.h): the knobs the
// `published` block states, under the command line's, and
// --compare-published: the published configuration's prediction against the
// published throughput and the device's memory (with --free, the free
// search's best plan too).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config_options.h"
#include "tessel/plan/profile/hardware_model.h"
#include "tessel/plan/published_run.h"
#include "tessel/plan/search/search.h"

namespace tessel::cli {

// `options` with each knob the block states and the command line does not
// give: the mesh (only when planning the published GPU count), the
// micro-batch count (where it divides the rows a data rank of the mesh
// planned holds; `batch`: the config's), schedule, chunks, ZeRO stage,
// recompute policy, layout.
ConfigOptions with_published_knobs(ConfigOptions options, const plan::PublishedRun& run, int ranks,
                                   int64_t batch);
// The knobs neither the command line nor the block gives (the search's).
std::string searched_knobs(const ConfigOptions& with_knobs);

struct CompareRequest {
  const ConfigOptions& options;  // the command line
  const TrainConfig& model;
  const plan::PublishedRun& run;
  int ranks = 0;
  bool free = false, json = false, ignore_device_memory = false;
};
// Prints the comparison; 0, or 1 when --free found no plan that fits.
int compare_published(const CompareRequest& request, const plan::HardwareModel& hw);

// One plan as `tessel plan --json` prints it (plan_command.cc).
nlohmann::json plan_json(const plan::Plan& p);

// A search's counts (configurations considered, pruned, screened, bounded,
// costed exactly, skipped for memory, costed) and its time, as JSON (plan_command.cc).
nlohmann::json search_counts_json(const plan::PlanResult& r);

}  // namespace tessel::cli
