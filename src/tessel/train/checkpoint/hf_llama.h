// Llama checkpoints in Hugging Face's layout (`tessel export --format hf`,
// `tessel import --format hf`): what transformers' LlamaForCausalLM reads
// and writes.
//
//   config.json        LlamaForCausalLM's config (hidden_size, ..., rope_theta,
//                      rope_scaling as Llama 3.1's "llama3" type)
//   model.safetensors  F32 tensors under HF's names, matrices (out, in)
//   tokenizer.model, tokenizer.json, tokenizer_config.json: copied when the
//                      source directory has them
//
// Tensor map (Tessel <-> HF): tok_embeddings <-> model.embed_tokens.weight;
// blockN.attn_norm.gamma <-> model.layers.N.input_layernorm.weight;
// blockN.attn.{wq,wk,wv,wo} <-> model.layers.N.self_attn.{q,k,v,o}_proj.weight;
// blockN.mlp_norm.gamma <-> model.layers.N.post_attention_layernorm.weight;
// blockN.mlp.{w1,w3,w2} <-> model.layers.N.mlp.{gate,up,down}_proj.weight;
// norm_f.gamma <-> model.norm.weight; output <-> lm_head.weight. Matrices are
// transposed (Tessel stores (in, out), named dims), nothing is rounded: a
// round trip is bit-exact.
//
// Rotary convention: Tessel's rotary op turns adjacent pairs (2i, 2i+1) of a
// head (Meta's complex view); HF's Llama turns (i, i + head/2) (rotate_half).
// q.k is unchanged when q and k are permuted alike, so the export reorders
// the rows of q_proj and k_proj within each head, HF row i <- Tessel 2i and
// HF row head/2 + i <- Tessel 2i+1 (what transformers' own conversion script
// from Meta's weights does), and the import undoes it; v and o are not
// permuted.
#pragma once

#include <cstdint>
#include <string>

#include "tessel/compile/config.h"

namespace tessel {

// For one head of `head` (even) features: HF's rotate-half index r holds
// Tessel's (Meta's) index meta_index_of_hf(r, head).
int64_t meta_index_of_hf(int64_t r, int64_t head);

// Writes `out_dir` (created; files replaced) from the Tessel checkpoint
// `checkpoint_dir`, whose model must be "llama". Throws naming the file and
// what is wrong before writing anything.
void export_hf_llama(const std::string& checkpoint_dir, const std::string& out_dir);

// Writes a Tessel checkpoint (step 0, no optimizer state) at `checkpoint_dir`
// from the HF directory `hf_dir` (config.json, and model.safetensors or a
// sharded model.safetensors.index.json; F32 or BF16 tensors); also writes
// `checkpoint_dir/tessel_config.json`, the config to train it with. Every
// tensor is checked (missing, extra, shape) before anything is written;
// errors name the file and the tensor.
void import_hf_llama(const std::string& hf_dir, const std::string& checkpoint_dir,
                     const TrainConfig& base);

}  // namespace tessel
