// One training step of a pipeline's Chrome trace (PipelineEngine::write_trace),
// for the report's compact timeline.
//
// Every step runs each rank's fixed action list once, so a trace of S steps
// holds S equal runs of events per rank; the last step is each rank's last
// (events / S) events. Times are made relative to that step's first event.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::report {

// {"ranks": ["rank 0 (pipe 0)", ...], "events": [{"rank", "name", "cat",
// "start_ms", "end_ms"}, ...]} for the last of `steps` steps; null (and a
// warning) when the trace does not split into `steps` equal steps.
nlohmann::json last_step_timeline(const nlohmann::json& trace, int64_t steps,
                                  const std::string& source, std::vector<std::string>& warnings);

}  // namespace tessel::report
