#include "train_summary.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tessel/train/checkpoint/safetensors.h"

namespace tessel::cli {
namespace {

// Per rank: the predicted bytes by kind, the measured peak and the peak RSS.
nlohmann::json memory_json(const RunEnd& end) {
  nlohmann::json memory = nlohmann::json::array();
  for (const RankMemory& m : end.predicted)
    memory.push_back({{"rank", m.rank},
                      {"predicted_bytes",
                       {{"parameters", m.parameters},
                        {"optimizer", m.optimizer},
                        {"arena", m.arena},
                        {"gradients_in_arena", m.gradients},
                        {"eval_arena", m.eval_arena},
                        {"zero_slice", m.zero_slice},
                        {"zero_block", m.zero_block},
                        {"device_runtime", m.device_runtime},
                        {"device", m.device()},
                        {"input_staging", m.host.input_staging},
                        {"full_tensor", m.host.full_tensor},
                        {"checkpoint_snapshot", m.host.checkpoint_snapshot},
                        {"host_optimizer", m.host.optimizer + m.host.offload_staging},
                        {"host_weights", m.host.weights},
                        {"host_activations", m.host.activations},
                        {"host_comm_staging", m.host.comm_staging},
                        {"total", m.total()}}},
                      {"measured_peak_tracked_bytes", end.tracked.at(m.rank)},
                      {"measured_peak_device_bytes", end.device.at(m.rank)},
                      {"peak_rss_bytes", end.rss.at(m.rank)}});
  return memory;
}

}  // namespace

void write_summary(Trainer& trainer, const TrainConfig& config, const std::string& out,
                   const RunEnd& end) {
  const Task& task = trainer.task();
  const Trainer::ModelStateBytes state = trainer.model_state_bytes();
  nlohmann::json summary = {{"model", config.model},
                            {"mesh", trainer.distributed().mesh().to_string()},
                            {"layout", trainer.distributed().layout().to_string()},
                            {"zero", config.zero},
                            {"recompute", trainer.config().recompute},
                            {"precision", config.precision},
                            {"threads_per_rank", trainer.threads()},
                            {"parameters", trainer.parameter_count()},
                            {"model_state_bytes_per_rank",
                             {{"parameters", state.parameters},
                              {"gradients", state.gradients},
                              {"optimizer", state.optimizer}}},
                            {"arena_bytes_per_rank", trainer.arena_bytes()},
                            {"peak_rss_bytes_rank0", peak_rss_bytes()},
                            {"memory_per_rank", memory_json(end)},
                            {"final_loss", end.last_loss},
                            {"final_val_loss", end.last_eval.loss},
                            {"baseline_loss", task.baseline_loss()},
                            {"baseline", task.baseline_name()}};
  if (trainer.pipeline()) {
    const PipelineModel& p = *trainer.pipeline();
    const Trainer::PipelineStats& pipe = end.pipe;
    summary["pipeline"] = {
        {"schedule", p.schedule().name},           {"microbatches", p.schedule().microbatches},
        {"stages", p.schedule().stages()},         {"first_block", p.partition().first_block},
        {"measured_bubble", pipe.measured_bubble}, {"theoretical_bubble", pipe.theoretical_bubble},
        {"weight_versions", pipe.weight_versions}, {"timed_steps", pipe.steps}};
  }
  write_file_atomically((std::filesystem::path(out) / "summary.json").string(),
                        summary.dump(2) + "\n");
}

void print_run_end(Trainer& trainer, const TrainConfig& config, const std::string& out,
                   const RunEnd& end) {
  const Trainer::PipelineStats& pipe = end.pipe;
  if (trainer.pipeline() && pipe.steps > 0) {
    std::printf(
        "pipeline %s, %d micro-batches, %d stages; bubble over %d steps (measured vs "
        "schedule with F=BI=BW=1):\n",
        trainer.pipeline()->schedule().name.c_str(), trainer.pipeline()->schedule().microbatches,
        trainer.pipeline()->schedule().stages(), pipe.steps);
    for (size_t r = 0; r < pipe.measured_bubble.size(); ++r)
      std::printf("  rank %zu (pipe %d): %.3f vs %.3f\n", r, pipe.pipe_rank[r],
                  pipe.measured_bubble[r], pipe.theoretical_bubble[r]);
  }
  if (!config.trace.empty()) std::printf("trace: %s\n", config.trace.c_str());
  std::printf("final: train loss %.4f, val loss %.4f nats (baseline %.4f)", end.last_loss,
              end.last_eval.loss, trainer.task().baseline_loss());
  if (end.last_eval.accuracy) std::printf(", val accuracy %.2f%%", 100 * *end.last_eval.accuracy);
  const Trainer::ModelStateBytes state = trainer.model_state_bytes();
  std::printf(
      "\nmodel state per rank: parameters %.2f MiB, gradients %.2f MiB, optimizer %.2f MiB\n",
      state.parameters / 1048576.0, state.gradients / 1048576.0, state.optimizer / 1048576.0);
  std::printf(
      "memory per rank (tensor storage: parameters, optimizer, arenas, host buffers; of it on "
      "the %s device), predicted vs measured peak; peak RSS adds code, libraries, the data set, "
      "MPI:\n",
      config.device.c_str());
  for (const RankMemory& m : end.predicted)
    std::printf(
        "  rank %d: predicted %s, measured %s (%+.2f%%); device %s, measured %s; peak RSS %s\n",
        m.rank, format_bytes(m.total()).c_str(), format_bytes(end.tracked[m.rank]).c_str(),
        100.0 * (end.tracked[m.rank] - m.total()) / m.total(), format_bytes(m.device()).c_str(),
        format_bytes(end.device[m.rank]).c_str(), format_bytes(end.rss[m.rank]).c_str());
  std::printf("checkpoint: %s\nmetrics:    %s/metrics.jsonl\n", end.checkpoint.c_str(),
              out.c_str());
}

}  // namespace tessel::cli
