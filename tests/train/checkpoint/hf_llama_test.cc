// Llama checkpoints in Hugging Face's layout (train/checkpoint/hf_llama.h):
// the rotary permutation against a committed NumPy reference of HF's
// rotate-half convention, a bit-exact round trip, the errors for what
// Tessel cannot import, and an imported checkpoint continued by `tessel
// train --resume`. (transformers itself loading an export is the optional
// check tests/optional/hf_transformers_check.py: CI has no PyTorch.)
#include "tessel/train/checkpoint/hf_llama.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "common/error_of.h"
#include "common/run_cli.h"
#include "common/test_dir.h"
#include "tessel/compile/model_registry.h"
#include "tessel/runtime/program.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/safetensors.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TrainConfig small_llama() {
  TrainConfig c;
  c.model = "llama";
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.d_model = 32;
  c.context = 16;
  c.multiple_of = 16;
  c.rope_scaling = {{"factor", 8.0}, {"original_max_position_embeddings", 64}};
  return c;
}

// A checkpoint of small_llama() at its initial parameters, saved as step 3.
fs::path write_checkpoint(const fs::path& dir, const TrainConfig& c) {
  Graph graph;
  GraphBuilder b(graph);
  build_model(c, b, 1, false);
  ParamStore params(graph, cpu_backend(), /*seed=*/7);
  save_checkpoint(dir.string(), c, params, 3);
  return dir;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void write_json(const fs::path& path, const json& j) { std::ofstream(path) << j.dump(2); }

// The HF model.safetensors rewritten with `edit` applied to its tensors.
void edit_weights(const fs::path& hf, const std::function<void(std::vector<TensorRecord>&)>& edit) {
  SafetensorsFile f = read_safetensors((hf / "model.safetensors").string());
  edit(f.tensors);
  std::vector<TensorView> views;
  for (const TensorRecord& t : f.tensors)
    views.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size()});
  write_safetensors((hf / "model.safetensors").string(), views, {{"format", "pt"}});
}

TEST(HfLlama, PermutationAndTesselRotaryMatchNumPyRotateHalfReference) {
  const json ref = read_json(fs::path(TESSEL_SOURCE_DIR) / "tests/golden/rotate_half.json");
  const int64_t head = ref["head"];
  const auto perm = ref["hf_row_from_meta"].get<std::vector<int64_t>>();
  ASSERT_EQ(static_cast<int64_t>(perm.size()), head);
  for (int64_t r = 0; r < head; ++r) EXPECT_EQ(meta_index_of_hf(r, head), perm[r]) << r;

  // Tessel's rotary op on x (Meta's order), then the export's permutation,
  // equals HF's rotate-half rotary of the permuted x.
  const auto x = ref["x"].get<std::vector<std::vector<double>>>();
  const auto want = ref["hf_rotated"].get<std::vector<std::vector<double>>>();
  const int64_t positions = static_cast<int64_t>(x.size());
  Graph graph;
  GraphBuilder b(graph);
  ValueId in = b.input("x", Shape{{"seq", positions}, {"head", head}});
  ValueId out = b.rotary(in, "head", "seq", ref["theta"].get<float>());
  Program p(graph, {out});
  std::vector<float> flat;
  for (const auto& row : x)
    for (double v : row) flat.push_back(static_cast<float>(v));
  p.write_input("x", flat.data(), flat.size() * sizeof(float));
  p.run();
  const std::vector<float> got = p.read_f32(out);
  double worst = 0;
  for (int64_t s = 0; s < positions; ++s)
    for (int64_t r = 0; r < head; ++r)
      worst = std::max(worst, std::abs(got[s * head + perm[r]] - want[s][r]));
  EXPECT_LT(worst, 1e-6) << "Tessel's rotary, permuted, differs from HF's rotate_half";
}

TEST(HfLlama, ExportImportRoundTripIsBitExact) {
  const fs::path dir = test_dir("tessel_hf");
  const TrainConfig c = small_llama();
  const fs::path ckpt = write_checkpoint(dir / "ckpt", c);
  export_hf_llama(ckpt.string(), (dir / "hf").string());
  const json config = read_json(dir / "hf" / "config.json");
  EXPECT_EQ(config["architectures"], json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["intermediate_size"], 96);  // 2 * 128 / 3 = 85, rounded up to 16s
  EXPECT_EQ(config["rope_scaling"]["rope_type"], "llama3");
  const SafetensorsFile hf = read_safetensors((dir / "hf" / "model.safetensors").string());
  EXPECT_EQ(hf.tensors.size(), 3u + 9u * 2);
  ASSERT_NE(hf.find("model.layers.1.self_attn.k_proj.weight"), nullptr);
  EXPECT_EQ(hf.find("model.layers.1.self_attn.k_proj.weight")->shape,
            (std::vector<int64_t>{16, 32}));  // (kv_heads * head, hidden)
  EXPECT_EQ(hf.find("lm_head.weight")->shape, (std::vector<int64_t>{256, 32}));

  import_hf_llama((dir / "hf").string(), (dir / "back").string(), TrainConfig{});
  const SafetensorsFile a = read_safetensors((ckpt / "model.safetensors").string());
  const SafetensorsFile r = read_safetensors((dir / "back" / "model.safetensors").string());
  ASSERT_EQ(a.tensors.size(), r.tensors.size());
  for (const TensorRecord& t : a.tensors) {
    const TensorRecord* back = r.find(t.name);
    ASSERT_NE(back, nullptr) << t.name;
    EXPECT_EQ(back->shape, t.shape) << t.name;
    EXPECT_TRUE(back->bytes == t.bytes) << t.name << " is not bit-exact after the round trip";
  }
  const TrainConfig imported = read_checkpoint_info((dir / "back").string()).config;
  EXPECT_EQ(imported.n_kv_head, 2);
  EXPECT_EQ(imported.rope_scaling.at("factor"), 8.0);
  // Exporting the import again gives the same HF bytes.
  export_hf_llama((dir / "back").string(), (dir / "hf2").string());
  const SafetensorsFile hf2 = read_safetensors((dir / "hf2" / "model.safetensors").string());
  for (const TensorRecord& t : hf.tensors)
    EXPECT_TRUE(hf2.find(t.name)->bytes == t.bytes) << t.name;
  fs::remove_all(dir);
}

TEST(HfLlama, ImportErrorsNameTheFileAndWhatIsWrong) {
  const fs::path dir = test_dir("tessel_hf_errors");
  const fs::path ckpt = write_checkpoint(dir / "ckpt", small_llama());
  auto fresh_export = [&] {
    fs::remove_all(dir / "hf");
    export_hf_llama(ckpt.string(), (dir / "hf").string());
  };
  auto import_error = [&] {
    return error_of([&] { import_hf_llama((dir / "hf").string(), (dir / "out").string(), {}); });
  };
  fresh_export();
  edit_weights(dir / "hf", [](auto& t) { t.erase(t.begin() + 4); });
  std::string e = import_error();
  EXPECT_NE(e.find("lacks tensor 'model.layers.0.self_attn.q_proj.weight'"), std::string::npos)
      << e;

  fresh_export();
  edit_weights(dir / "hf", [](auto& t) {
    t.push_back(t[1]);
    t.back().name = "model.layers.0.self_attn.q_proj.bias";
  });
  e = import_error();
  EXPECT_NE(e.find("model.safetensors' has tensor "
                   "'model.layers.0.self_attn.q_proj.bias', which Tessel's llama "
                   "does not have"),
            std::string::npos)
      << e;

  fresh_export();
  edit_weights(dir / "hf", [](auto& t) {
    for (TensorRecord& r : t)
      if (r.name == "lm_head.weight") r.shape = {32, 256};
  });
  e = import_error();
  EXPECT_NE(e.find("tensor 'lm_head.weight' has shape [32,256], config.json "
                   "implies [256,32]"),
            std::string::npos)
      << e;

  fresh_export();
  const fs::path config = dir / "hf" / "config.json";
  json j = read_json(config);
  for (const auto& [key, value, message] : std::vector<std::tuple<std::string, json, std::string>>{
           {"architectures", json::array({"MistralForCausalLM"}),
            "Tessel imports LlamaForCausalLM only"},
           {"tie_word_embeddings", true, "'tie_word_embeddings' is true"},
           {"hidden_act", "gelu", "Tessel's llama uses silu"},
           {"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4}}, "rope type 'yarn'"},
           {"head_dim", 16, "head_dim must be hidden_size / num_attention_heads"}}) {
    json bad = j;
    bad[key] = value;
    write_json(config, bad);
    e = import_error();
    EXPECT_NE(e.find(config.string()), std::string::npos) << e;
    EXPECT_NE(e.find(message), std::string::npos) << key << ": " << e;
  }
  EXPECT_FALSE(fs::exists(dir / "out")) << "a failed import wrote a checkpoint";

  TrainConfig gpt;
  gpt.n_layer = 1;
  const fs::path gpt_ckpt = write_checkpoint(dir / "gpt", gpt);
  EXPECT_NE(error_of([&] {
              export_hf_llama(gpt_ckpt.string(), (dir / "x").string());
            }).find("holds model 'gpt'; --format hf exports 'llama' only"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(HfLlama, ImportedCheckpointResumesTraining) {
  const fs::path dir = test_dir("tessel_hf_resume");
  const fs::path ckpt = write_checkpoint(dir / "ckpt", small_llama());
  CliResult e = run_cli("export --format hf " + ckpt.string() + " --out " + (dir / "hf").string());
  ASSERT_EQ(e.exit_code, 0) << e.output;
  CliResult i = run_cli("import --format hf " + (dir / "hf").string() + " --out " +
                        (dir / "imported").string());
  ASSERT_EQ(i.exit_code, 0) << i.output;
  // export names its checkpoint as sample and eval do, too: the same files
  CliResult named = run_cli("export --format hf --checkpoint " + ckpt.string() + " --out " +
                            (dir / "hf_named").string());
  ASSERT_EQ(named.exit_code, 0) << named.output;
  EXPECT_EQ(read_safetensors((dir / "hf_named" / "model.safetensors").string()).tensors.size(),
            read_safetensors((dir / "hf" / "model.safetensors").string()).tensors.size());
  CliResult t =
      run_cli("train --config " + (dir / "imported" / "tessel_config.json").string() +
              " --resume " + (dir / "imported").string() + " --out " + (dir / "run").string() +
              " --set steps=2 --set warmup_steps=1 --set eval_every=0 "
              "--set eval_batches=1 --set batch=2 --threads 1");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const CheckpointInfo after = read_checkpoint_info((dir / "run" / "checkpoint").string());
  EXPECT_EQ(after.step, 2);
  // Training moved the imported weights.
  const SafetensorsFile a = read_safetensors((dir / "imported" / "model.safetensors").string());
  const SafetensorsFile b =
      read_safetensors((dir / "run" / "checkpoint" / "model.safetensors").string());
  EXPECT_FALSE(a.find("block0.attn.wq")->bytes == b.find("block0.attn.wq")->bytes);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tessel
