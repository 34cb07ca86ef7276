#include "tessel/train/data/tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <unordered_map>

#include "tessel/base/error.h"
#include "tessel/train/data/token_file.h"

namespace tessel {
namespace {

// SentencePiece's sentences: the non-blank lines of the documents.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>& documents) : docs_(documents) { advance(); }
  bool done() const override { return doc_ >= docs_.size(); }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  // Moves to the next non-blank line.
  void advance() {
    while (doc_ < docs_.size()) {
      const std::string& d = docs_[doc_];
      if (pos_ >= d.size()) {
        ++doc_, pos_ = 0;
        continue;
      }
      size_t end = d.find('\n', pos_);
      if (end == std::string::npos) end = d.size();
      line_.assign(d, pos_, end - pos_);
      pos_ = end + 1;
      if (line_.find_first_not_of(" \t\r") != std::string::npos) return;
    }
  }
  const std::vector<std::string>& docs_;
  size_t doc_ = 0, pos_ = 0;
  std::string line_;
};

}  // namespace

Tokenizer Tokenizer::byte_level() { return Tokenizer(); }

Tokenizer Tokenizer::load(const std::string& path) {
  Tokenizer t;
  t.hash_ = tokenizer_file_hash(path);  // throws naming an unreadable path
  t.model_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = t.model_->Load(path);
  if (!status.ok())
    TS_THROW("tokenizer model '", path, "' is not a SentencePiece model: ", status.ToString());
  t.path_ = path;
  return t;
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

int64_t Tokenizer::vocab() const { return model_ ? model_->GetPieceSize() : 256; }

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (!model_) {  // byte-level: each byte is its id
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    return std::vector<int32_t>(bytes, bytes + text.size());
  }
  std::vector<int> ids;
  const auto status = model_->Encode(text, &ids);
  if (!status.ok()) TS_THROW("tokenizer '", path_, "' cannot encode: ", status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::vector<int32_t> Tokenizer::encode_document(std::string_view text) const {
  std::vector<int32_t> ids = encode(text);
  if (model_ && model_->eos_id() >= 0) ids.push_back(model_->eos_id());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  if (!model_) return std::string(ids.begin(), ids.end());
  std::vector<int> in;
  for (int32_t id : ids)  // out-of-range ids (a padded model vocabulary) decode to nothing
    if (id >= 0 && id < model_->GetPieceSize()) in.push_back(id);
  std::string text;
  const auto status = model_->Decode(in, &text);
  if (!status.ok()) TS_THROW("tokenizer '", path_, "' cannot decode: ", status.ToString());
  return text;
}

void train_tokenizer(const std::vector<std::string>& documents, const TokenizerTraining& options,
                     const std::string& out) {
  if (options.type != "bpe" && options.type != "unigram")
    TS_THROW("tokenizer type must be bpe or unigram, got '", options.type, "'");
  if (options.vocab < 260)
    TS_THROW("tokenizer vocabulary ", options.vocab,
             " is too small: byte fallback alone takes 256 ids plus 3 special ones");
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", options.type},
      {"vocab_size", std::to_string(options.vocab)},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", "2"},
      {"minloglevel", "1"},
  };
  LineIterator lines(documents);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  if (!status.ok()) TS_THROW("tokenizer training failed: ", status.ToString());
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!(file << model) || !file.flush()) TS_THROW("cannot write tokenizer model '", out, "'");
}

}  // namespace tessel
