#include "tessel/train/checkpoint/hf_llama.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/compile/model_registry.h"
#include "tessel/models/llama.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/safetensors.h"

namespace tessel {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

const char* const kTokenizerFiles[] = {"tokenizer.model", "tokenizer.json",
                                       "tokenizer_config.json"};

// One parameter: the Tessel tensor seen as a (rows, cols) matrix, rows the
// first `row_dims` dims; row_dims 0 copies the tensor as it is, otherwise HF
// holds the transpose (cols, rows), its rows permuted within blocks of
// `rotary_head` (q and k) when that is not 0.
struct HfTensor {
  std::string tessel, hf;
  int row_dims = 0;
  int64_t rotary_head = 0;
};

std::vector<HfTensor> hf_tensors(const TrainConfig& c) {
  const int64_t head = c.d_model / c.n_head;
  std::vector<HfTensor> t = {{"tok_embeddings", "model.embed_tokens.weight"},
                             {"norm_f.gamma", "model.norm.weight"},
                             {"output", "lm_head.weight", 1}};
  for (int64_t n = 0; n < c.n_layer; ++n) {
    const std::string b = "block" + std::to_string(n) + ".";
    const std::string h = "model.layers." + std::to_string(n) + ".";
    t.push_back({b + "attn_norm.gamma", h + "input_layernorm.weight"});
    t.push_back({b + "attn.wq", h + "self_attn.q_proj.weight", 1, head});
    t.push_back({b + "attn.wk", h + "self_attn.k_proj.weight", 1, head});
    t.push_back({b + "attn.wv", h + "self_attn.v_proj.weight", 1});
    t.push_back({b + "attn.wo", h + "self_attn.o_proj.weight", 3});
    t.push_back({b + "mlp_norm.gamma", h + "post_attention_layernorm.weight"});
    t.push_back({b + "mlp.w1", h + "mlp.gate_proj.weight", 1});
    t.push_back({b + "mlp.w3", h + "mlp.up_proj.weight", 1});
    t.push_back({b + "mlp.w2", h + "mlp.down_proj.weight", 1});
  }
  return t;
}

struct Matrix {
  int64_t rows = 1, cols = 1;
};

Matrix matrix_of(const Shape& s, int row_dims) {
  Matrix m;
  for (int i = 0; i < s.rank(); ++i) (i < row_dims ? m.rows : m.cols) *= s[i].size;
  return m;
}

std::vector<int64_t> hf_shape(const Shape& s, const HfTensor& t) {
  if (t.row_dims == 0) return s.sizes();
  const Matrix m = matrix_of(s, t.row_dims);
  return {m.cols, m.rows};
}

int64_t tessel_col(int64_t hf_row, int64_t head) {
  if (head == 0) return hf_row;
  return hf_row / head * head + meta_index_of_hf(hf_row % head, head);
}

// Tessel's (rows, cols) matrix as HF's (cols, rows), or back (`to_hf` false).
void convert(const float* src, float* dst, const Shape& s, const HfTensor& t, bool to_hf) {
  const Matrix m = matrix_of(s, t.row_dims);
  if (t.row_dims == 0) {
    std::memcpy(dst, src, static_cast<size_t>(m.rows * m.cols) * sizeof(float));
    return;
  }
  for (int64_t j = 0; j < m.cols; ++j) {
    const int64_t col = tessel_col(j, t.rotary_head);
    for (int64_t i = 0; i < m.rows; ++i) {
      if (to_hf)
        dst[j * m.rows + i] = src[i * m.cols + col];
      else
        dst[i * m.cols + col] = src[j * m.rows + i];
    }
  }
}

// The llama graph's parameters for `c` (values unset), in the CPU backend's memory.
std::unique_ptr<ParamStore> llama_params(const TrainConfig& c, Graph& graph) {
  GraphBuilder b(graph);
  build_model(c, b, 1, /*training=*/false);
  return std::make_unique<ParamStore>(graph, cpu_backend());  // converted on the host
}

json hf_config(const TrainConfig& c) {
  json rope_scaling = nullptr;
  if (!c.rope_scaling.empty()) {
    const RotaryScaling s = llama_rope_scaling(c);
    rope_scaling = {{"rope_type", "llama3"},
                    {"factor", s.factor},
                    {"low_freq_factor", s.low_freq_factor},
                    {"high_freq_factor", s.high_freq_factor},
                    {"original_max_position_embeddings", std::llround(s.original_context)}};
  }
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"hidden_size", c.d_model},
          {"intermediate_size", llama_hidden_size(llama_config(c))},
          {"num_hidden_layers", c.n_layer},
          {"num_attention_heads", c.n_head},
          {"num_key_value_heads", c.n_kv_head == 0 ? c.n_head : c.n_kv_head},
          {"head_dim", c.d_model / c.n_head},
          {"vocab_size", c.vocab},
          {"max_position_embeddings", c.context},
          {"rms_norm_eps", c.norm_eps},
          {"rope_theta", c.rope_theta},
          {"rope_scaling", rope_scaling},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"tie_word_embeddings", false},
          {"torch_dtype", "float32"}};
}

void copy_tokenizer_files(const fs::path& from, const fs::path& to) {
  for (const char* name : kTokenizerFiles)
    if (fs::exists(from / name))
      fs::copy_file(from / name, to / name, fs::copy_options::overwrite_existing);
}

// Every tensor of an HF directory: model.safetensors, or the files a
// model.safetensors.index.json's weight_map names.
class HfWeights {
 public:
  explicit HfWeights(const fs::path& dir) {
    if (fs::exists(dir / "model.safetensors")) {
      source = (dir / "model.safetensors").string();
      open(dir / "model.safetensors");
      return;
    }
    const fs::path index = dir / "model.safetensors.index.json";
    source = index.string();
    std::ifstream in(index);
    if (!in)
      TS_THROW("import: '", dir.string(),
               "' has neither model.safetensors nor model.safetensors.index.json");
    json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      TS_THROW("import: '", index.string(), "' has no 'weight_map' object");
    std::map<std::string, bool> files;
    for (const auto& [name, file] : j["weight_map"].items())
      if (file.is_string()) files[file.get<std::string>()] = true;
    for (const auto& [file, _] : files) open(dir / file);
  }
  std::map<std::string, std::pair<SafetensorsReader*, const SafetensorsReader::Tensor*>> tensors;
  std::string source;  // model.safetensors, or the index naming the files

 private:
  void open(const fs::path& path) {
    readers_.push_back(std::make_unique<SafetensorsReader>(path.string()));
    for (const SafetensorsReader::Tensor& t : readers_.back()->tensors()) {
      if (tensors.count(t.name))
        TS_THROW("import: tensor '", t.name, "' is in both '", tensors[t.name].first->path(),
                 "' and '", path.string(), "'");
      tensors[t.name] = {readers_.back().get(), &t};
    }
  }
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
};

// An HF tensor as f32 (F32 read as is, BF16 widened exactly).
std::vector<float> read_f32(SafetensorsReader& r, const SafetensorsReader::Tensor& t) {
  std::vector<float> out;
  if (t.dtype == "F32") {
    out.resize((t.end - t.begin) / 4);
    r.read(t, 0, t.end - t.begin, out.data());
  } else if (t.dtype == "BF16") {
    std::vector<uint16_t> half((t.end - t.begin) / 2);
    r.read(t, 0, t.end - t.begin, half.data());
    out.resize(half.size());
    widen_bf16(half.data(), out.data(), static_cast<int64_t>(half.size()));
  } else {
    TS_THROW("import: '", r.path(), "' tensor '", t.name, "' is ", t.dtype,
             "; Tessel imports F32 or BF16");
  }
  return out;
}

}  // namespace

int64_t meta_index_of_hf(int64_t r, int64_t head) {
  const int64_t half = head / 2;
  return r < half ? 2 * r : 2 * (r - half) + 1;
}

void export_hf_llama(const std::string& checkpoint_dir, const std::string& out_dir) {
  const TrainConfig c = read_checkpoint_info(checkpoint_dir).config;
  if (c.model != "llama")
    TS_THROW("export: checkpoint '", checkpoint_dir, "' holds model '", c.model,
             "'; --format hf exports 'llama' only");
  Graph graph;
  std::unique_ptr<ParamStore> params = llama_params(c, graph);
  load_checkpoint(checkpoint_dir, *params, /*with_optimizer=*/false);
  std::vector<std::vector<float>> data;
  std::vector<TensorView> views;
  for (const HfTensor& t : hf_tensors(c)) {
    const ParamEntry& e = params->at(t.tessel);
    data.emplace_back(static_cast<size_t>(e.value.numel()));
    convert(e.value.to_host().data(), data.back().data(), e.value.shape(), t, /*to_hf=*/true);
    views.push_back({t.hf, "F32", hf_shape(e.value.shape(), t), data.back().data(),
                     data.back().size() * sizeof(float)});
  }
  fs::create_directories(out_dir);
  write_safetensors((fs::path(out_dir) / "model.safetensors").string(), views, {{"format", "pt"}});
  write_file_atomically((fs::path(out_dir) / "config.json").string(), hf_config(c).dump(2) + "\n");
  copy_tokenizer_files(checkpoint_dir, out_dir);
}

namespace {

TrainConfig parse_hf_llama_config(const std::string& path, const TrainConfig& base) {
  std::ifstream in(path);
  if (!in) TS_THROW("import: cannot open '", path, "'");
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) TS_THROW("import: '", path, "' is not a JSON object");
  auto fail = [&](const std::string& what) { TS_THROW("import: '", path, "': ", what); };
  auto get = [&](const char* key, const json& fallback) {
    const json v = j.value(key, fallback);
    if (v.is_null() && fallback.is_null()) fail(str_cat("has no '", key, "'"));
    return v;
  };
  auto integer = [&](const char* key, const json& fallback = nullptr) {
    const json v = get(key, fallback);
    if (!v.is_number_integer()) fail(str_cat("'", key, "' must be an integer, got ", v.dump()));
    return v.get<int64_t>();
  };
  const json arch = j.value("architectures", json::array({"LlamaForCausalLM"}));
  if (arch != json::array({"LlamaForCausalLM"}) || j.value("model_type", "llama") != "llama")
    fail(str_cat("architecture ", arch.dump(), ", model_type ", j.value("model_type", "?"),
                 ": Tessel imports LlamaForCausalLM only"));
  if (j.value("hidden_act", "silu") != "silu")
    fail("hidden_act " + j["hidden_act"].dump() + ": Tessel's llama uses silu");
  for (const char* key : {"attention_bias", "mlp_bias", "tie_word_embeddings"})
    if (j.value(key, false))
      fail(str_cat("'", key, "' is true: Tessel's llama has no biases and an untied head"));
  TrainConfig c = base;
  c.model = "llama";
  c.n_layer = integer("num_hidden_layers");
  c.d_model = integer("hidden_size");
  c.n_head = integer("num_attention_heads");
  c.n_kv_head = integer("num_key_value_heads", c.n_head);
  c.vocab = integer("vocab_size");
  c.context = integer("max_position_embeddings", 2048);
  c.norm_eps = get("rms_norm_eps", 1e-6).get<double>();
  if (c.n_head <= 0 || c.d_model % c.n_head != 0 ||
      integer("head_dim", c.d_model / c.n_head) != c.d_model / c.n_head)
    fail("head_dim must be hidden_size / num_attention_heads (Tessel has no other head size)");
  // transformers 5 nests the rotary keys in rope_parameters; 4 has rope_theta, rope_scaling.
  json rope = j.value("rope_parameters", json::object());
  if (rope.is_null()) rope = json::object();
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) rope.update(j["rope_scaling"]);
  c.rope_theta = rope.value("rope_theta", j.value("rope_theta", 10000.0));
  const std::string type = rope.value("rope_type", rope.value("type", "default"));
  c.rope_scaling = json::object();
  if (type == "llama3") {
    for (const char* key :
         {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
      if (rope.contains(key)) c.rope_scaling[key] = rope[key];
  } else if (type != "default") {
    fail("rope type '" + type + "': Tessel has the default and llama3 rotary scalings");
  }
  // The SwiGLU hidden size as Tessel's rule gives it: intermediate_size itself.
  const int64_t hidden = integer("intermediate_size");
  const int64_t rule = 2 * (4 * c.d_model) / 3;
  c.ffn_dim_multiplier = hidden >= rule ? 0.0 : (static_cast<double>(hidden) + 0.5) / rule;
  c.multiple_of = hidden >= rule ? hidden : 1;
  try {
    c.validate(/*with_data=*/false);
  } catch (const Error& e) {
    fail(e.what());
  }
  if (llama_hidden_size(llama_config(c)) != hidden)
    fail(str_cat("intermediate_size ", hidden, " cannot be expressed by Tessel's size rule"));
  return c;
}

// The Tessel config of an HF Llama config.json (model keys; the rest from
// `base`). Throws naming the file and key for an architecture Tessel does not
// have (not LlamaForCausalLM, biases, tied embeddings, an activation other
// than silu, another rope type, head_dim other than hidden_size / heads).
TrainConfig hf_llama_config(const std::string& path, const TrainConfig& base) {
  try {
    return parse_hf_llama_config(path, base);
  } catch (const nlohmann::json::exception& e) {  // a key of the wrong JSON type
    TS_THROW("import: '", path, "': ", e.what());
  }
}

}  // namespace

void import_hf_llama(const std::string& hf_dir, const std::string& checkpoint_dir,
                     const TrainConfig& base) {
  const TrainConfig c = hf_llama_config((fs::path(hf_dir) / "config.json").string(), base);
  HfWeights weights(hf_dir);
  Graph graph;
  std::unique_ptr<ParamStore> params = llama_params(c, graph);
  const std::vector<HfTensor> wanted = hf_tensors(c);
  std::map<std::string, bool> used;
  for (const HfTensor& t : wanted) {
    auto it = weights.tensors.find(t.hf);
    if (it == weights.tensors.end())
      TS_THROW("import: '", weights.source, "' lacks tensor '", t.hf, "' (Tessel's ", t.tessel,
               ")");
    auto [reader, tensor] = it->second;
    ParamEntry& e = params->at(t.tessel);
    const std::vector<int64_t> shape = hf_shape(e.value.shape(), t);
    if (tensor->shape != shape)
      TS_THROW("import: '", reader->path(), "' tensor '", t.hf, "' has shape ",
               json(tensor->shape).dump(), ", config.json implies ", json(shape).dump());
    const std::vector<float> values = read_f32(*reader, *tensor);
    for (float v : values)
      if (!std::isfinite(v))
        TS_THROW("import: '", reader->path(), "' tensor '", t.hf, "' holds ", v);
    std::vector<float> converted(values.size());
    convert(values.data(), converted.data(), e.value.shape(), t, /*to_hf=*/false);
    e.value.write(converted.data());
    used[t.hf] = true;
  }
  for (const auto& [name, where] : weights.tensors)
    if (!used.count(name) && name.find("rotary_emb.inv_freq") == std::string::npos)
      TS_THROW("import: '", where.first->path(), "' has tensor '", name,
               "', which Tessel's llama does not have");
  save_checkpoint(checkpoint_dir, c, *params, /*step=*/0);
  write_file_atomically((fs::path(checkpoint_dir) / "tessel_config.json").string(),
                        c.to_json().dump(2) + "\n");
  copy_tokenizer_files(hf_dir, checkpoint_dir);
}

}  // namespace tessel
