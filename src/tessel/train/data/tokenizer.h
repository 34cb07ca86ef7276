// Tokenizers: byte-level (ids are bytes, vocabulary 256, no model file) or
// a SentencePiece model (BPE or unigram, Debian's libsentencepiece), trained
// by train_tokenizer and read from its .model file (docs/data.md).
//
// A SentencePiece model is trained with byte fallback (any text encodes, no
// unknown ids), the identity normalisation and whitespace kept, so decoding
// gives the text back. encode_document appends the model's end-of-sentence
// id, marking where a document ends in a token file; byte-level documents
// are their bytes alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tessel {

class Tokenizer {
 public:
  static Tokenizer byte_level();
  // Loads a SentencePiece model; throws naming `path` if it is not one.
  static Tokenizer load(const std::string& path);
  Tokenizer(Tokenizer&&) noexcept;
  ~Tokenizer();

  int64_t vocab() const;
  // tokenizer_file_hash of the model file; 0 for byte-level.
  uint64_t hash() const { return hash_; }
  const std::string& path() const { return path_; }  // "" for byte-level
  std::vector<int32_t> encode_document(std::string_view text) const;
  std::vector<int32_t> encode(std::string_view text) const;  // no end-of-document id
  std::string decode(const std::vector<int32_t>& ids) const;

 private:
  Tokenizer() = default;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> model_;  // null: byte-level
  std::string path_;
  uint64_t hash_ = 0;
};

struct TokenizerTraining {
  int64_t vocab = 8000;
  std::string type = "bpe";  // "bpe" | "unigram"
  // Sentences read for training at most (SentencePiece samples them).
  int64_t max_sentences = 2'000'000;
};

// Trains on `documents` (split into lines: SentencePiece's sentences) and
// writes the model to `out`. Throws with SentencePiece's reason if it fails
// (e.g. a vocabulary too large for the text).
void train_tokenizer(const std::vector<std::string>& documents, const TokenizerTraining& options,
                     const std::string& out);

}  // namespace tessel
