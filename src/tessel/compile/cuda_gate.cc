#include "tessel/compile/cuda_gate.h"

#include <cstdlib>
#include <cstring>

#include "tessel/base/error.h"
#include "tessel/sharding/mesh.h"

namespace tessel {
namespace {

// The first key of `config` the CUDA backend cannot run yet, and why.
std::string unsupported_key(const TrainConfig& config) {
  if (config.precision != "f32")
    return "precision " + config.precision + ": bf16 einsums are not on CUDA yet; use f32";
  if (const int ranks = Mesh::parse(config.mesh).rank_count(); ranks > 1)
    return "mesh " + config.mesh + " (" + std::to_string(ranks) +
           " ranks): collectives and sharded ops have no CUDA kernels yet; use one rank";
  if (config.microbatches > 1)
    return "microbatches " + std::to_string(config.microbatches) +
           ": pipelines and gradient accumulation need fill_zero and scale, not written for "
           "CUDA yet; use 1";
  if (config.offload != "none")
    return "offload " + config.offload + ": offload has not been written for CUDA streams yet";
  if (config.model != "gpt" && config.model != "mlp")
    return "model " + config.model + ": its ops (RMSNorm, rotary, SiLU) have no CUDA kernels yet";
  if (config.model == "gpt" && config.attention != "unfused")
    return "attention " + config.attention +
           ": the fused attention op has no CUDA kernel yet; set attention unfused";
  if (config.loss != "unfused")
    return "loss " + config.loss + ": the fused loss has no CUDA kernel yet; set loss unfused";
  return "";
}

}  // namespace

std::string cuda_refusal(const TrainConfig& config, bool unverified_allowed) {
  if (config.device != "cuda") return "";
  if (!unverified_allowed)
    return "device cuda: the CUDA backend has never run on a GPU, so Tessel does not train "
           "on it yet (docs/gpu.md); use device cpu. The prepared GPU check sets "
           "TESSEL_UNVERIFIED_CUDA=1 to try it";
  const std::string why = unsupported_key(config);
  return why.empty() ? "" : "device cuda: config " + why + " (docs/gpu.md)";
}

void refuse_unrunnable_device(const TrainConfig& config) {
  const char* env = std::getenv("TESSEL_UNVERIFIED_CUDA");
  const std::string why = cuda_refusal(config, env && std::strcmp(env, "1") == 0);
  if (!why.empty()) TS_THROW(why);
}

}  // namespace tessel
