// The end of a `tessel train` run, on rank 0: OUT/summary.json (read by the
// report and the benchmarks) and the closing lines printed (the pipeline's
// bubble, the losses, model state, and predicted against measured memory).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/compile/memory_report.h"
#include "tessel/train/trainer.h"

namespace tessel::cli {

// What a finished run measured: gathered from every rank (collectives)
// before rank 0 reports it. Vectors are indexed by world rank.
struct RunEnd {
  EvalResult last_eval{-1, -1};
  double last_loss = 0;
  std::vector<int64_t> tracked;  // measured peak of the tracked allocations
  std::vector<int64_t> device;   // measured peak of the backend's device memory
  std::vector<int64_t> rss;      // peak resident set size
  Trainer::PipelineStats pipe;
  std::vector<RankMemory> predicted;
  std::string checkpoint;  // the final checkpoint's directory
};

void write_summary(Trainer& trainer, const TrainConfig& config, const std::string& out,
                   const RunEnd& end);
void print_run_end(Trainer& trainer, const TrainConfig& config, const std::string& out,
                   const RunEnd& end);

}  // namespace tessel::cli
