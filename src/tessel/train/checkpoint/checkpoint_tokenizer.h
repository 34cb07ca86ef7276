// The tokenizer model a checkpoint was trained with, kept beside it: saving
// copies the config's 'tokenizer' into the checkpoint as tokenizer.model and
// records its hash in the manifest ("tokenizer": {"file", "hash", "source"}),
// so `sample` and `eval` decode with exactly the model that cut the training
// tokens, wherever the original file went (docs/data.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tessel/compile/config.h"

namespace tessel {

// The hash as the manifest writes it (16 hex digits).
std::string tokenizer_hash_hex(uint64_t hash);

// With a tokenizer in `config`: copies it into `dir` and adds its entry to
// `manifest`. Throws naming the file if it cannot be read or copied.
void copy_tokenizer_into(const std::filesystem::path& dir, const TrainConfig& config,
                         nlohmann::json& manifest);

// The checkpoint's tokenizer.model, checked against the hash its manifest
// records; "" for a byte-level checkpoint. Throws naming the file if it is
// missing or does not match.
std::string checkpoint_tokenizer(const std::string& dir);

// Resuming checkpoint `dir` with `config` (data "tokens"): the tokenizers
// (or byte-level tokens) must be the same; throws naming both otherwise.
void check_resume_tokenizer(const std::string& dir, const TrainConfig& config);

}  // namespace tessel
