#include "tessel/compile/config.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <type_traits>

#include "tessel/base/error.h"
#include "tessel/compile/config_limits.h"
#include "tessel/compile/model_registry.h"
#include "tessel/passes/recompute_policy.h"

namespace tessel {
namespace {

using nlohmann::json;

// One entry per key: how to read it from and write it to JSON, its JSON
// type and one line of meaning (tessel config --list, docs/config.md).
struct KeyRule {
  std::function<void(TrainConfig&, const json&)> read;
  std::function<json(const TrainConfig&)> write;
  const char* type;
  const char* doc;
};

template <typename T>
const char* json_type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "boolean";
  else if constexpr (std::is_integral_v<T>)
    return "integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "number";
  else if constexpr (std::is_same_v<T, std::string>)
    return "string";
  else if constexpr (std::is_same_v<T, json>)
    return "object";
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
    return "list of integers";
  else
    return "object of strings";
}

template <typename T>
KeyRule field(T TrainConfig::*member, const char* doc) {
  return {[member](TrainConfig& c, const json& v) { c.*member = v.get<T>(); },
          [member](const TrainConfig& c) { return json(c.*member); }, json_type_name<T>(), doc};
}

// The data keys (docs/data.md).
std::map<std::string, KeyRule> data_rules() {
  return {
      {"data", field(&TrainConfig::data,
                     "fortunes (byte-level text) | tokens (a token file, docs/data.md) | "
                     "synthetic (uniform random tokens of any vocab, for timing) | "
                     "fashion-mnist (images)")},
      {"token_file", field(&TrainConfig::token_file,
                           "data tokens: a token file written by `tessel tokenize encode`")},
      {"tokenizer", field(&TrainConfig::tokenizer,
                          "data tokens: the tokenizer model that cut token_file (empty: "
                          "byte-level tokens)")},
      {"val_fraction", field(&TrainConfig::val_fraction,
                             "data tokens: share of the documents held out for validation "
                             "(seeded by 'seed')")},
      {"data_dir", field(&TrainConfig::data_dir,
                         "a directory of fortune files (entries separated by lines holding only "
                         "%); empty: the Debian package's")},
  };
}

// The optimizer and learning-rate keys (docs/config.md).
std::map<std::string, KeyRule> optimizer_rules() {
  return {
      {"optimizer", field(&TrainConfig::optimizer, "adamw | sgd")},
      {"offload", field(&TrainConfig::offload,
                        "none, or a comma list of: optimizer (AdamW's moments in pinned host "
                        "memory, the update on the CPU cores), weights (with optimizer: the f32 "
                        "weights there too, read in place by the programs), activations (what "
                        "the backward reads, in pinned host memory between its forward and "
                        "backward use) (docs/memory.md)")},
      {"lr", field(&TrainConfig::lr, "peak learning rate")},
      {"min_lr",
       field(&TrainConfig::min_lr, "learning rate at the end of the decay (cosine, linear, wsd)")},
      {"lr_schedule", field(&TrainConfig::lr_schedule,
                            "after the warm-up: cosine (to min_lr at steps) | linear (to min_lr) "
                            "| constant (lr) | wsd (warmup-stable-decay: lr, then linear to "
                            "min_lr over the last decay_fraction of the steps)")},
      {"decay_fraction",
       field(&TrainConfig::decay_fraction, "wsd: the fraction of 'steps' spent decaying")},
      {"warmup_steps",
       field(&TrainConfig::warmup_steps, "linear warm-up steps (must be below steps)")},
      {"weight_decay", field(&TrainConfig::weight_decay, "decoupled weight decay (AdamW, SGD)")},
      {"decay_norms_and_biases",
       field(&TrainConfig::decay_norms_and_biases,
             "weight-decay rank-1 parameters too (biases, norm gains); false excludes them")},
      {"beta1", field(&TrainConfig::beta1, "AdamW's first-moment decay")},
      {"beta2", field(&TrainConfig::beta2, "AdamW's second-moment decay")},
      {"eps", field(&TrainConfig::eps, "AdamW's epsilon")},
      {"grad_clip", field(&TrainConfig::grad_clip, "global gradient-norm clip (0: off)")},
  };
}

// `table` with the data, optimizer and learning-rate keys added.
std::map<std::string, KeyRule> with_data_and_optimizer_rules(std::map<std::string, KeyRule> table) {
  table.merge(data_rules());
  table.merge(optimizer_rules());
  return table;
}

const std::map<std::string, KeyRule>& rules() {
  static const std::map<std::string, KeyRule> table = with_data_and_optimizer_rules({
      {"model", field(&TrainConfig::model,
                      "a registered model: gpt (byte-level GPT), llama (Llama-family "
                      "transformer, docs/models.md), mlp (Fashion-MNIST classifier), or one "
                      "registered from C++ or Python")},
      {"n_layer", field(&TrainConfig::n_layer, "transformer blocks")},
      {"n_head", field(&TrainConfig::n_head, "attention heads (must divide d_model)")},
      {"d_model", field(&TrainConfig::d_model, "width of the residual stream")},
      {"context", field(&TrainConfig::context, "sequence length in tokens")},
      {"vocab", field(&TrainConfig::vocab, "vocabulary size (the GPT trains on bytes: 256)")},
      {"hidden", field(&TrainConfig::hidden, "the MLP's hidden width")},
      {"dropout", field(&TrainConfig::dropout, "dropout probability (0: none; gpt only)")},
      {"attention_dropout",
       field(&TrainConfig::attention_dropout,
             "dropout probability on the attention probabilities, fused or unfused, the same "
             "mask (0: none; gpt only; docs/attention.md)")},
      {"n_kv_head", field(&TrainConfig::n_kv_head,
                          "llama: key/value heads of grouped-query attention (must divide n_head; "
                          "0: n_head)")},
      {"rope_theta", field(&TrainConfig::rope_theta, "llama: base of the rotary frequencies")},
      {"rope_scaling",
       field(&TrainConfig::rope_scaling,
             "llama: Llama 3.1's frequency scaling, e.g. {\"factor\": 8, \"low_freq_factor\": 1, "
             "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192} ({}: none)")},
      {"ffn_dim_multiplier",
       field(&TrainConfig::ffn_dim_multiplier,
             "llama: multiplies the SwiGLU hidden size 2/3 * 4 * d_model (0: none)")},
      {"multiple_of", field(&TrainConfig::multiple_of,
                            "llama: the SwiGLU hidden size is rounded up to a multiple of this")},
      {"norm_eps", field(&TrainConfig::norm_eps, "llama: RMSNorm's epsilon")},
      {"attention", field(&TrainConfig::attention,
                          "gpt, llama: fused (one op, no stored probabilities) | unfused (einsum, "
                          "softmax, einsum); docs/attention.md")},
      {"loss", field(&TrainConfig::loss,
                     "gpt, llama: unfused (the LM head's logits stored for the backward) | fused "
                     "(never stored: recomputed tile by tile; docs/memory.md)")},
      {"model_options",
       field(&TrainConfig::model_options, "a registered model's own keys, e.g. {\"patch\": 7}")},
      {"batch",
       field(&TrainConfig::batch, "sequences (or images) per step, over all data-parallel ranks")},
      {"steps", field(&TrainConfig::steps, "training steps")},
      {"precision",
       field(&TrainConfig::precision,
             "f32 | bf16 (GEMM operands in bf16, f32 accumulation; docs/precision.md)")},
      {"bf16_activations",
       field(&TrainConfig::bf16_activations,
             "with bf16: store values only einsums read in bf16 (same numbers, half the bytes)")},
      {"grad_reduce_precision",
       field(&TrainConfig::grad_reduce_precision,
             "f32 | bf16: gradient all-reduce buckets on the wire (no pipelines)")},
      {"tp_comm_precision",
       field(&TrainConfig::tp_comm_precision,
             "f32 | bf16: tensor-parallel partial sums on the wire (needs precision bf16)")},
      {"seed",
       field(&TrainConfig::seed,
             "seeds initial weights, dropout and data order (counter-based, layout-independent)")},
      {"eval_every",
       field(&TrainConfig::eval_every, "steps between validation passes (0: only at the end)")},
      {"eval_batches", field(&TrainConfig::eval_batches, "batches per validation pass")},
      {"sample_chars",
       field(&TrainConfig::sample_chars,
             "gpt, llama: tokens sampled after training (bytes when byte-level; 0: none)")},
      {"sample_prompt", field(&TrainConfig::sample_prompt, "gpt, llama: the sample's prompt")},
      {"threads", field(&TrainConfig::threads,
                        "intra-op threads per rank (0: the host's cores / the ranks on it)")},
      {"device", field(&TrainConfig::device,
                       "cpu | cuda: where programs run (docs/gpu.md; cuda is refused until its "
                       "backend has run on a GPU)")},
      {"mesh",
       field(&TrainConfig::mesh, "mesh axes and sizes, e.g. data=2,model=2 (empty: one rank)")},
      {"layout",
       field(&TrainConfig::layout,
             "dims to mesh axes, e.g. batch=data,heads=model (empty: defaults by axis name)")},
      {"context_parallel",
       field(&TrainConfig::context_parallel,
             "all_to_all | ring: fused attention with `seq` split over a mesh axis, e.g. "
             "--mesh ctx=2 --layout seq=ctx (empty: all_to_all; docs/attention.md)")},
      {"bucket_mib", field(&TrainConfig::bucket_mib, "gradient all-reduce bucket size in MiB")},
      {"collectives",
       field(&TrainConfig::collectives,
             "auto | mpi | staged: collectives and pipeline transfers on the buffers "
             "themselves (mpi), or through pinned host staging (staged; auto: staged on a GPU, "
             "docs/gpu.md)")},
      {"staging_mib", field(&TrainConfig::staging_mib,
                            "collectives staged: MiB of each rank's block staged at a time")},
      {"zero", field(&TrainConfig::zero,
                     "ZeRO stage over the data axis (else a context axis): 0 | 1 | 2 | 3")},
      {"recompute",
       field(&TrainConfig::recompute,
             "none | selective | blocks[:K[:J]][+selective] | auto (docs/architecture.md)")},
      {"memory_limit",
       field(&TrainConfig::memory_limit,
             "per-rank memory budget, e.g. 2GiB: refused before compute if the plan exceeds it")},
      {"shard",
       field(&TrainConfig::shard,
             "per-value placement overrides by label, e.g. {\"block0.mlp.act\": \"seq=model\"}")},
      {"microbatches", field(&TrainConfig::microbatches,
                             "micro-batches per step (pipelines, gradient accumulation)")},
      {"schedule",
       field(&TrainConfig::schedule,
             "pipeline schedule: gpipe | 1f1b | interleaved | zb-h1 | pipedream | 2bw | xpipe")},
      {"chunks", field(&TrainConfig::chunks, "model chunks per pipeline rank (interleaved)")},
      {"stages",
       field(&TrainConfig::stages,
             "the block each pipeline stage after the first starts at (empty: balanced)")},
      {"trace",
       field(&TrainConfig::trace, "write a Chrome trace (JSON) of every step's actions here")},
      {"checkpoint_every", field(&TrainConfig::checkpoint_every,
                                 "steps between periodic checkpoints (0: only the final one)")},
      {"keep_checkpoints", field(&TrainConfig::keep_checkpoints, "periodic checkpoints kept")},
      {"async_save", field(&TrainConfig::async_save, "write checkpoints on a background thread")},
  });
  return table;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

// Names other frameworks (PyTorch, Hugging Face, nanoGPT, Megatron) give
// Tessel's keys, which edit distance alone would not find.
const std::map<std::string, std::string>& key_aliases() {
  static const std::map<std::string, std::string> aliases = {
      {"learning_rate", "lr"},
      {"max_lr", "lr"},
      {"min_learning_rate", "min_lr"},
      {"warmup", "warmup_steps"},
      {"warmup_iters", "warmup_steps"},
      {"num_warmup_steps", "warmup_steps"},
      {"max_steps", "steps"},
      {"max_iters", "steps"},
      {"num_steps", "steps"},
      {"train_steps", "steps"},
      {"batch_size", "batch"},
      {"micro_batch_size", "batch"},
      {"max_grad_norm", "grad_clip"},
      {"clip_grad", "grad_clip"},
      {"gradient_clipping", "grad_clip"},
      {"num_layers", "n_layer"},
      {"num_heads", "n_head"},
      {"n_embd", "d_model"},
      {"hidden_size", "d_model"},
      {"block_size", "context"},
      {"seq_len", "context"},
      {"max_seq_len", "context"},
      {"vocab_size", "vocab"},
      {"num_key_value_heads", "n_kv_head"},
      {"n_kv_heads", "n_kv_head"},
      {"rms_norm_eps", "norm_eps"},
      {"epsilon", "eps"},
      {"num_threads", "threads"},
      {"lr_scheduler", "lr_schedule"},
      {"scheduler", "lr_schedule"},
      {"lr_decay", "lr_schedule"},
      {"decay_lr", "lr_schedule"},
      {"gradient_accumulation_steps", "microbatches"},
  };
  return aliases;
}

[[noreturn]] void unknown_key(const std::string& key) {
  if (key == "published")
    TS_THROW(
        "config: key 'published' describes a published training run, an input of `tessel "
        "plan --config` only (docs/planner.md); to train its model, copy the file without "
        "the 'published' block");
  std::string best;
  if (auto it = key_aliases().find(key); it != key_aliases().end()) best = it->second;
  size_t best_distance = 4;
  if (best.empty())
    for (const auto& [known, rule] : rules()) {
      size_t d = edit_distance(key, known);
      if (d < best_distance) best_distance = d, best = known;
    }
  TS_THROW("config: unknown key '", key, "'",
           best.empty() ? std::string() : str_cat(" (did you mean '", best, "'?)"));
}

void read_key(TrainConfig& c, const std::string& key, const json& value) {
  auto it = rules().find(key);
  if (it == rules().end()) unknown_key(key);
  try {
    it->second.read(c, value);
  } catch (const json::exception&) {
    TS_THROW("config: key '", key, "' has value ", value.dump(), " of the wrong type (expected ",
             it->second.write(TrainConfig{}).type_name(), ")");
  }
}

// The Llama keys: grouped-query heads, the rotary base, the SwiGLU rule.
void validate_llama(const TrainConfig& c) {
  const int64_t kv = c.n_kv_head == 0 ? c.n_head : c.n_kv_head;
  if (kv < 1 || c.n_head % kv != 0)
    TS_THROW("config: 'n_kv_head' (", c.n_kv_head, ") must divide 'n_head' (", c.n_head,
             ") so each key/value head serves n_head/n_kv_head query heads (0: n_head)");
  if ((c.d_model / c.n_head) % 2 != 0)
    TS_THROW("config: llama's rotary positions turn pairs of a head's dims, so d_model/n_head (",
             c.d_model, "/", c.n_head, " = ", c.d_model / c.n_head, ") must be even");
  if (!(c.rope_theta > 1)) TS_THROW("config: 'rope_theta' must be above 1, got ", c.rope_theta);
  llama_rope_scaling(c);  // throws naming the key
  if (!(c.ffn_dim_multiplier >= 0))
    TS_THROW("config: 'ffn_dim_multiplier' must be >= 0 (0: none), got ", c.ffn_dim_multiplier);
  if (c.multiple_of < 1) TS_THROW("config: 'multiple_of' must be positive, got ", c.multiple_of);
  if (!(c.norm_eps > 0)) TS_THROW("config: 'norm_eps' must be positive, got ", c.norm_eps);
  if (c.dropout != 0)
    TS_THROW("config: model \"llama\" has no dropout (as Llama); 'dropout' must be 0, got ",
             c.dropout);
  if (c.attention_dropout != 0)
    TS_THROW(
        "config: model \"llama\" has no dropout (as Llama); 'attention_dropout' must be 0, got ",
        c.attention_dropout);
}

// data "tokens": a token file, a share of documents to hold out.
void validate_token_data(const TrainConfig& c) {
  if (c.token_file.empty())
    TS_THROW(
        "config: data \"tokens\" needs 'token_file' (write one with `tessel tokenize "
        "encode`, docs/data.md)");
  if (!(c.val_fraction > 0 && c.val_fraction < 1))
    TS_THROW("config: 'val_fraction' must be in (0, 1), got ", c.val_fraction);
}

}  // namespace

TrainConfig TrainConfig::from_json(const json& j) {
  if (!j.is_object()) TS_THROW("config: expected a JSON object, got ", j.type_name());
  TrainConfig c;
  for (const auto& [key, value] : j.items()) read_key(c, key, value);
  return c;
}

TrainConfig TrainConfig::from_file(const std::string& path) {
  return from_json(read_config_json(path));
}

json read_config_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) TS_THROW("config: cannot open '", path, "'");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (406)
    TS_THROW("config: '", path, "' is not valid JSON: ", e.what());
  }
}

void TrainConfig::set(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    TS_THROW("config override '", assignment, "' must look like key=value");
  std::string key = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;
  read_key(*this, key, value);
}

json TrainConfig::to_json() const {
  json j = json::object();
  for (const auto& [key, rule] : rules()) j[key] = rule.write(*this);
  return j;
}

std::vector<ConfigKeyDoc> TrainConfig::key_docs() {
  const TrainConfig defaults;
  std::vector<ConfigKeyDoc> docs;
  for (const auto& [key, rule] : rules())
    docs.push_back({key, rule.type, rule.write(defaults).dump(), rule.doc});
  return docs;
}

std::vector<std::string> TrainConfig::known_keys() {
  std::vector<std::string> keys;
  for (const auto& [key, rule] : rules()) keys.push_back(key);
  return keys;
}

bool offloads(const TrainConfig& c, const std::string& what) {
  bool found = false;
  if (c.offload == "none") return false;
  std::stringstream parts(c.offload);
  for (std::string part; std::getline(parts, part, ',');) {
    if (part != "optimizer" && part != "weights" && part != "activations")
      TS_THROW(
          "config: 'offload' must be none or a comma list of optimizer, weights and "
          "activations, got \"",
          c.offload, "\"");
    found = found || part == what;
  }
  return found;
}

int offload_copy_bytes(const TrainConfig& c) { return offloads(c, "weights") ? 4 : 12; }

bool stages_collectives(const TrainConfig& c) {
  return c.collectives == "staged" || (c.collectives == "auto" && c.device != "cpu");
}

int64_t staging_piece(const TrainConfig& c) {
  return std::max<int64_t>(1, static_cast<int64_t>(c.staging_mib * 1048576.0 / sizeof(float)));
}

namespace {

// The `collectives` key against the device and the ops that communicate
// inside a kernel.
void check_collectives(const TrainConfig& c) {
  if (c.collectives != "auto" && c.collectives != "mpi" && c.collectives != "staged")
    TS_THROW("config: 'collectives' must be auto, mpi or staged, got \"", c.collectives, "\"");
  if (!(c.staging_mib > 0)) TS_THROW("config: 'staging_mib' must be positive, got ", c.staging_mib);
  if (c.collectives == "mpi" && c.device != "cpu")
    TS_THROW(
        "config: 'collectives' \"mpi\" hands Open MPI the device's buffers, which it reaches "
        "only on the CPU; device \"",
        c.device, "\" needs \"staged\" (or \"auto\")");
  if (stages_collectives(c) && c.context_parallel == "ring")
    TS_THROW(
        "config: 'context_parallel' \"ring\" passes key and value blocks inside the "
        "attention kernel, which collectives \"staged\" does not stage yet; use "
        "context_parallel \"all_to_all\"",
        c.device == "cpu" ? " or collectives \"mpi\"" : "");
}

}  // namespace

void TrainConfig::validate(bool with_data) const {
  auto positive = [](const char* key, double v) {
    if (!(v > 0)) TS_THROW("config: '", key, "' must be positive, got ", v);
  };
  auto non_negative = [](const char* key, double v) {
    if (!(v >= 0)) TS_THROW("config: '", key, "' must be >= 0, got ", v);
  };
  auto either = [](const char* key, const std::string& v, const char* a, const char* b) {
    if (v != a && v != b)
      TS_THROW("config: '", key, "' must be \"", a, "\" or \"", b, "\", got \"", v, "\"");
  };
  if (!model_registered(model)) build_model_error(model);
  data_kind_of(data);  // throws naming the value
  check_model_options(*this);
  // A model registered with its own data kind trains only on that data.
  const DataKind kind = model_data_kind(*this);
  if (with_data && data_kind_of(data) != kind)
    TS_THROW("config: model \"", model, "\" ",
             kind == DataKind::kText ? "trains on text" : "classifies images",
             "; 'data' must be \"", data_name(kind), "\", got \"", data, "\"");
  if (lr_schedule != "cosine" && lr_schedule != "linear" && lr_schedule != "constant" &&
      lr_schedule != "wsd")
    TS_THROW("config: 'lr_schedule' must be cosine, linear, constant or wsd, got \"", lr_schedule,
             "\"");
  if (!(decay_fraction > 0 && decay_fraction <= 1))
    TS_THROW("config: 'decay_fraction' must be in (0, 1], got ", decay_fraction);
  if (with_data && data == "tokens") validate_token_data(*this);
  either("optimizer", optimizer, "adamw", "sgd");
  if (offloads(*this, "weights") && !offloads(*this, "optimizer"))
    TS_THROW(
        "config: 'offload' \"weights\" keeps the f32 weights where the offloaded optimizer "
        "updates them; offload the optimizer too (\"optimizer,weights\")");
  if (offloads(*this, "optimizer") && optimizer != "adamw")
    TS_THROW("config: 'offload' \"optimizer\" moves AdamW's moments to host memory; optimizer '",
             optimizer, "' keeps no state to move (use offload \"none\")");
  either("device", device, "cpu", "cuda");
  either("precision", precision, "f32", "bf16");
  either("grad_reduce_precision", grad_reduce_precision, "f32", "bf16");
  either("tp_comm_precision", tp_comm_precision, "f32", "bf16");
  if (tp_comm_precision == "bf16" && precision != "bf16")
    TS_THROW(
        "config: 'tp_comm_precision' bf16 carries tensor-parallel partial sums in bf16, "
        "which only a bf16 run rounds to; this run has 'precision' \"",
        precision, "\". Set precision bf16, or tp_comm_precision f32");
  positive("batch", batch);
  positive("steps", steps);
  positive("lr", lr);
  non_negative("min_lr", min_lr);
  non_negative("warmup_steps", warmup_steps);
  non_negative("weight_decay", weight_decay);
  non_negative("grad_clip", grad_clip);
  non_negative("eval_every", eval_every);
  positive("eval_batches", eval_batches);
  non_negative("sample_chars", sample_chars);
  non_negative("threads", threads);
  positive("bucket_mib", bucket_mib);
  check_collectives(*this);
  non_negative("checkpoint_every", checkpoint_every);
  positive("keep_checkpoints", keep_checkpoints);
  if (recompute == "auto") {
    if (memory_limit.empty())
      TS_THROW(
          "config: 'recompute' \"auto\" chooses the recomputation that fits the per-rank "
          "memory budget, so it needs 'memory_limit' (--memory-limit, e.g. 2GiB)");
  } else {
    const RecomputePolicy policy = RecomputePolicy::parse(recompute);
    if (is_builtin_transformer(model) && n_layer > 0) policy.check_blocks(n_layer);
  }
  if (zero < 0 || zero > 3) TS_THROW("config: 'zero' must be 0, 1, 2 or 3, got ", zero);
  positive("microbatches", microbatches);
  positive("chunks", chunks);
  if (batch % microbatches != 0)
    TS_THROW("config: 'microbatches' (", microbatches, ") must divide 'batch' (", batch,
             ") into equal micro-batches");
  if (!(beta1 >= 0 && beta1 < 1)) TS_THROW("config: 'beta1' must be in [0, 1), got ", beta1);
  if (!(beta2 >= 0 && beta2 < 1)) TS_THROW("config: 'beta2' must be in [0, 1), got ", beta2);
  positive("eps", eps);
  if (!(dropout >= 0 && dropout < 1))
    TS_THROW("config: 'dropout' must be in [0, 1), got ", dropout);
  if (!(attention_dropout >= 0 && attention_dropout < 1))
    TS_THROW("config: 'attention_dropout' must be in [0, 1), got ", attention_dropout);
  if (is_builtin_transformer(model)) {
    positive("n_layer", n_layer);
    positive("n_head", n_head);
    positive("d_model", d_model);
    positive("vocab", vocab);
    if (context < 2) TS_THROW("config: 'context' must be at least 2, got ", context);
    either("attention", attention, "fused", "unfused");
    either("loss", loss, "unfused", "fused");
    if (d_model % n_head != 0)
      TS_THROW("config: 'n_head' (", n_head, ") must divide 'd_model' (", d_model,
               ") so every head gets d_model/n_head dims");
    if (with_data && data == "fortunes" && vocab != 256)
      TS_THROW("config: 'vocab' must be 256 for byte-level text (data \"fortunes\"), got ", vocab,
               "; other vocabularies train on data \"tokens\" (docs/data.md), or are timed on data "
               "\"synthetic\"");
    if (model == "llama") validate_llama(*this);
  } else if (model == "mlp") {
    positive("hidden", hidden);
  }
  if (!context_parallel.empty()) either("context_parallel", context_parallel, "all_to_all", "ring");
  check_config_sizes(*this, with_data);
  if (is_builtin_transformer(model) && attention == "fused" && d_model / n_head > 128)
    TS_THROW("config: 'attention' \"fused\" takes head dims (d_model / n_head) up to 128, got ",
             d_model / n_head, " (d_model ", d_model, ", n_head ", n_head,
             "): use more heads or \"unfused\"");
}

}  // namespace tessel
