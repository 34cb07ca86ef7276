// A published training run as a planner input: the `published` block of
// examples/published/*.json, beside the config keys of the run's model.
//
// The block states what the publication states and nothing more: the GPU
// count, the cluster file standing for its machines, the mesh, and where
// given the micro-batches, the schedule (and chunks), the ZeRO stage, the
// recompute policy and the layout, with the throughput it reports. `tessel
// plan --config FILE` takes each stated knob from it unless the command
// line gives that knob (the command line wins; unstated knobs are
// searched). Only `tessel plan` reads the block: `tessel train` refuses it
// (config.cc names it).
//
// Throughput is converted to seconds per step with the FLOPs the
// publication counted per step (Narayanan et al., SC21, eq. 3: with full
// recomputation, the forward is counted twice; `flops_counted`).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tessel/compile/config.h"

namespace tessel::plan {

struct PublishedRun {
  std::string file;  // the config file it came from, for messages
  std::string run, source, notes;
  std::string cluster;  // resolved path of the cluster file; "" when not stated
  int gpus = 0;
  int pipe = 1, data = 1, model = 1, ctx = 1;
  std::string mesh;  // "pipe=P,data=D,model=M,ctx=C", axes of size 1 left out
  // Stated knobs; unset when the block gives null or leaves them out.
  std::optional<int64_t> microbatches;  // from micro_batch_size where only that is given
  std::optional<std::string> schedule, recompute, layout;
  std::optional<int> chunks, zero;
  // The run overlaps its data-parallel gradient reduction and parameter
  // gathers with the pipeline's compute (FSDP's asynchronous prefetch and
  // reduce): CostOptions::overlap_data_parallel.
  bool data_parallel_overlap = false;
  double tflops_per_gpu = 0;  // 0 when not stated; from tokens_per_s_per_gpu when that is
  // Whether the publication counted the recomputed forward pass in its
  // FLOPs ("with_recompute", Megatron's eq. 3) or only the model's ("model").
  bool flops_with_recompute = false;
};

// The file's config keys without its `published` block, and the block
// (nullopt when there is none). Throws on a file that cannot be read.
struct ConfigFile {
  nlohmann::json keys;
  std::optional<nlohmann::json> published;
};
ConfigFile read_config_file(const std::string& path);

// Reads and checks a `published` block against the run's model (`model`:
// the file's other keys). Every error names the file and the key.
PublishedRun parse_published(const nlohmann::json& block, const TrainConfig& model,
                             const std::string& file);

// FLOPs of one training step as Narayanan et al. count them (SC21, eq. 3),
// for any block: per token, a block's forward is 2 P (its matmul weights P)
// plus 4 s h (scores and mix over the whole context), the logits 2 V h;
// forward and backward are 3 forwards, and with the blocks' forward
// recomputed the blocks count 4. For the GPT's block (P = 12 h^2) this is
// 72 B s l h^2 (1 + s / 6h + V / 12lh), or 96 B s l h^2 (1 + s / 6h + V / 16lh).
double narayanan_step_flops(const TrainConfig& model, bool with_recompute);

// The weights one block multiplies by (its matmul weights, no norms or
// biases): 12 h^2 for the GPT; Llama's grouped-query projections and SwiGLU.
double block_matmul_weights(const TrainConfig& model);

// The published step time in seconds: the step's FLOPs (as the publication
// counted them) over its reported FLOP/s of all GPUs. Throws when the block
// states no tflops_per_gpu.
double published_step_seconds(const PublishedRun& run, const TrainConfig& model);

}  // namespace tessel::plan
