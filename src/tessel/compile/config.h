// Training configuration: one flat set of named keys, read from JSON.
//
// Every key has a type, a default and a check; an unknown key, a wrong type
// or a value out of range is an Error naming the key (and, for a misspelt
// key, the nearest known one). Command-line overrides use the same keys
// (`--set lr=1e-3`), so a config file and a flag can never disagree on
// spelling. Validation runs before any data is loaded or memory allocated.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel {

// A config key as `tessel config --list` and docs/config.md describe it.
struct ConfigKeyDoc {
  std::string name, type, default_value, doc;
};

struct TrainConfig {
  // Model.
  std::string model =
      "gpt";  // a registered model (compile/model_registry.h): "gpt", "llama", "mlp", ...
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t d_model = 128;
  int64_t context = 64;
  int64_t vocab = 256;
  int64_t hidden = 1024;  // mlp hidden width
  double dropout = 0.0;
  double attention_dropout = 0.0;  // on the attention probabilities (gpt only)
  // Llama (models/llama.h): key/value heads (0: n_head), the rotary base,
  // the SwiGLU hidden-size rule's multiplier (0: none) and rounding, RMSNorm's eps.
  int64_t n_kv_head = 0;
  double rope_theta = 10000.0;
  // Llama 3.1's rotary frequency scaling, Hugging Face's rope_scaling object; {} = none.
  nlohmann::json rope_scaling = nlohmann::json::object();
  double ffn_dim_multiplier = 0.0;
  int64_t multiple_of = 256;
  double norm_eps = 1e-5;
  // GPT attention: "fused" (one op, FlashAttention's algorithm: no stored
  // probabilities; docs/attention.md) | "unfused" (einsum, softmax, einsum).
  std::string attention = "fused";
  // GPT and Llama loss: "unfused" (the LM head's logits stored for the backward) |
  // "fused" (one linear_cross_entropy op: logits recomputed tile by tile in the backward).
  std::string loss = "unfused";
  // A registered model's own keys (ModelSpec::options), e.g. {"patch": 7};
  // keys it did not register are errors naming them.
  nlohmann::json model_options = nlohmann::json::object();
  // Data.
  std::string data = "fortunes";  // "fortunes" | "tokens" (text) | "fashion-mnist" (images)
  std::string data_dir;           // empty: the Debian package's directory
  // data "tokens" (docs/data.md): a token file of `tessel tokenize encode`,
  // the tokenizer model that cut it ("" for byte-level tokens), and the
  // share of its documents held out for validation.
  std::string token_file;
  std::string tokenizer;
  double val_fraction = 0.1;
  // Optimisation.
  int64_t batch = 16;
  int64_t steps = 200;
  std::string optimizer = "adamw";  // "adamw" | "sgd"
  // What lives in pinned host memory instead of the device (docs/memory.md):
  // "none" | "optimizer" (AdamW's moments, the update on the CPU cores) |
  // "activations" (values the backward reads, between their forward and
  // backward use) | "optimizer,activations".
  std::string offload = "none";
  // Number format of the GEMMs: "f32" | "bf16" (einsum operands rounded to
  // bf16, f32 accumulation and output; master weights, gradients, optimizer
  // state and every reduction stay f32; docs/precision.md).
  std::string precision = "f32";
  // With bf16: values only einsums read are stored in bf16 (the same numbers, half
  // the bytes); false keeps every activation in f32, for comparison.
  bool bf16_activations = true;
  // Gradient all-reduce buckets (and ZeRO's reduce-scatters) on the wire: "f32" |
  // "bf16" (summed in f32; half the bytes). bf16 only without pipeline.
  std::string grad_reduce_precision = "f32";
  // Tensor-parallel partial sums of activations and their gradients (not the
  // parameter gradients) on the wire: "f32" | "bf16" (summed in f32, the sum
  // identical on every rank; half the bytes). bf16 needs precision bf16.
  std::string tp_comm_precision = "f32";
  double lr = 1e-3;
  double min_lr = 1e-4;
  int64_t warmup_steps = 20;
  // After the warm-up (train/optimizer.h): "cosine" to min_lr at `steps` |
  // "linear" to min_lr | "constant" lr | "wsd" (warmup-stable-decay: lr, then
  // linear to min_lr over the last decay_fraction of the steps).
  std::string lr_schedule = "cosine";
  double decay_fraction = 0.2;
  double weight_decay = 0.1;
  bool decay_norms_and_biases = false;  // false: rank-1 parameters get no weight decay
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;  // global-norm clip; 0 disables
  uint64_t seed = 1234;
  // Evaluation, logging, output.
  int64_t eval_every = 100;  // 0: only at the end
  int64_t eval_batches = 8;
  int64_t sample_chars = 0;  // gpt, llama: tokens sampled after training (0: none)
  std::string sample_prompt = "The ";
  int threads = 0;  // 0: the host's cores / the ranks on it (train/threads.h)
  // Where programs run: "cpu" | "cuda" (backend/backend.h).
  std::string device = "cpu";
  // Parallelism.
  std::string mesh;        // "data=2,model=2"; "" = one rank
  std::string layout;      // "batch=data,heads=model"; "" = defaults for the mesh's axis names
  double bucket_mib = 25;  // gradient all-reduce bucket size
  // How collectives and pipeline transfers reach device memory
  // (docs/gpu.md): "mpi" (Open MPI on the buffers themselves; the CPU, whose
  // device memory is host memory) | "staged" (through pinned host staging,
  // staging_mib per rank block at a time) | "auto" (mpi on the CPU, staged on
  // a GPU).
  std::string collectives = "auto";
  double staging_mib = 4;
  // Fused attention with `seq` split over a mesh axis (docs/attention.md):
  // "all_to_all" (Ulysses) | "ring" (key/value blocks travel a ring) | "" (all-to-all).
  // Asked in a model without the fused attention op: an error.
  std::string context_parallel;
  // Activations recomputed in backward instead of stored: none | selective | blocks |
  // blocks:K | blocks:K:J [+selective] (passes/recompute_policy.h) | auto (the fewest
  // recomputed FLOPs that fit 'memory_limit', train/recompute_choice.h).
  std::string recompute = "none";
  // ZeRO stage over the data axis: 0, 1 or 2 (optimizer state and gradients
  // sharded), 3 (parameters too, gathered on use).
  int zero = 0;
  std::string memory_limit;  // per-rank budget, e.g. "2GiB"; "" = none
  // Pipelines (a `pipe` mesh axis) and gradient accumulation.
  int64_t microbatches = 1;       // the batch is run as this many equal micro-batches
  std::string schedule = "1f1b";  // gpipe | 1f1b | interleaved | zb-h1 | pipedream | 2bw | xpipe
  int64_t chunks = 1;             // model chunks per pipeline rank (interleaved)
  std::vector<int64_t> stages;    // block each stage after the first starts at; [] = balanced
  std::string trace;              // Chrome trace (JSON) of every step's actions; "" = none
  // Per-value overrides of the layout, by node label: {"block0.mlp.act": "seq=model"}
  // ("" replicates the value on every axis).
  std::map<std::string, std::string> shard;
  // Periodic checkpoints (checkpoint/checkpoint_dirs.h): every N steps into
  // OUT/checkpoints/step-N/ (0: only the final one), keeping the newest K.
  // async_save: copy the state into host buffers at the step boundary (counted
  // in the memory prediction) and write on a background thread.
  int64_t checkpoint_every = 0;
  int64_t keep_checkpoints = 2;
  bool async_save = true;
  // Not a config key: the step this process starts at (a resumed run's
  // checkpoint step; Trainer::load_checkpoint sets it). A run that takes no
  // periodic save in (first_step, steps] allocates no snapshot.
  int64_t first_step = 0;

  static TrainConfig from_json(const nlohmann::json& j);
  static TrainConfig from_file(const std::string& path);
  // Applies "key=value" (value parsed as JSON, else taken as a string).
  void set(const std::string& assignment);
  nlohmann::json to_json() const;
  // Cross-key checks (e.g. n_head divides d_model); throws naming the keys.
  // Without `with_data`, only what the model and parallelism need: plans and
  // dry runs of models no installed data set fits (vocab 51200) are fine.
  void validate(bool with_data = true) const;
  static std::vector<std::string> known_keys();
  // Every key with its JSON type, its default (as JSON) and one line of
  // meaning, from the one table that reads and writes the keys.
  static std::vector<ConfigKeyDoc> key_docs();
};

// Whether `c.offload` names `what` ("optimizer", "weights" or
// "activations"); throws naming the key and its value if one of its
// comma-separated parts is none of them.
bool offloads(const TrainConfig& c, const std::string& what);
// Bytes an offloaded optimizer copies between device and host per updated
// element: the gradient out, and the value out and back unless offload
// "weights" keeps it on the host (4 or 12).
int offload_copy_bytes(const TrainConfig& c);

// A config file's JSON (its keys not read yet); throws naming an unreadable file.
nlohmann::json read_config_json(const std::string& path);

// Whether collectives and pipeline transfers go through pinned host staging
// (`collectives` staged, or auto on a device other than the CPU).
bool stages_collectives(const TrainConfig& c);
// Elements of one rank block the staging holds at a time (staging_mib).
int64_t staging_piece(const TrainConfig& c);

}  // namespace tessel
