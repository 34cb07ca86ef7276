// Chrome trace files (the JSON "Trace Event Format" that Perfetto and
// chrome://tracing open): one track per rank, one complete ("X") event per
// pipeline action, named by kind, micro-batch and stage; its args hold the
// micro-batch and stage where the action has them (an optimizer step covering
// all micro-batches has neither).
#pragma once

#include <string>
#include <vector>

#include "tessel/runtime/pipeline_executor.h"

namespace tessel {

// `per_rank[r]`: rank r's events (times in seconds from a shared origin);
// `track_names[r]`: its track's label. Returns the JSON text.
std::string chrome_trace_json(const std::vector<std::vector<TraceEvent>>& per_rank,
                              const std::vector<std::string>& track_names);

}  // namespace tessel
