// `tessel tokenize train` and `tessel tokenize encode`: a SentencePiece
// tokenizer trained on the user's own text, and text cut into a token file
// for data "tokens" (docs/data.md).
#include <cstdio>
#include <optional>

#include "commands.h"
#include "tessel/train/data/text_documents.h"
#include "tessel/train/data/token_file.h"
#include "tessel/train/data/tokenizer.h"

namespace tessel::cli {
namespace {

struct TokenizeOptions {
  std::vector<std::string> inputs;
  std::optional<std::string> separator;  // set by --separator, even to ""
  std::string out, model;
  TokenizerTraining training;
};

void add_input_options(CLI::App* sub, TokenizeOptions& o) {
  sub->add_option("--input", o.inputs,
                  "text files and directories (read recursively, sorted; one document per file "
                  "unless --separator)")
      ->required();
  sub->add_option_function<std::string>(
      "--separator", [&o](const std::string& s) { o.separator = s; },
      "lines holding only this separate documents (e.g. %; \"\": a blank line)");
  sub->add_option("--out", o.out, "output file")->required();
}

int run_train(const TokenizeOptions& o) {
  std::vector<std::string> skipped;
  const std::vector<std::string> files = list_text_files(o.inputs, &skipped);
  std::vector<std::string> documents;
  int64_t bytes = 0;
  for_each_document(files, o.separator, [&](std::string_view text, const std::string&) {
    documents.emplace_back(text);
    bytes += static_cast<int64_t>(text.size());
  });
  train_tokenizer(documents, o.training, o.out);
  const Tokenizer t = Tokenizer::load(o.out);
  std::printf(
      "{\"model\": \"%s\", \"type\": \"%s\", \"vocab\": %lld, \"files\": %zu, \"documents\": "
      "%zu, \"bytes\": %lld, \"skipped_files\": %zu}\n",
      o.out.c_str(), o.training.type.c_str(), static_cast<long long>(t.vocab()), files.size(),
      documents.size(), static_cast<long long>(bytes), skipped.size());
  return 0;
}

int run_encode(const TokenizeOptions& o) {
  const Tokenizer t = o.model.empty() ? Tokenizer::byte_level() : Tokenizer::load(o.model);
  std::vector<std::string> skipped;  // every path is checked before the output is opened
  const std::vector<std::string> files = list_text_files(o.inputs, &skipped);
  TokenFileWriter writer(o.out, t.vocab(), t.hash());
  int64_t bytes = 0;
  for_each_document(files, o.separator, [&](std::string_view text, const std::string& source) {
    writer.add_document(t.encode_document(text), source);
    bytes += static_cast<int64_t>(text.size());
  });
  writer.finish();
  std::printf(
      "{\"token_file\": \"%s\", \"tokenizer\": \"%s\", \"vocab\": %lld, \"documents\": %lld, "
      "\"tokens\": %lld, \"bytes\": %lld, \"bytes_per_token\": %.4f, \"files\": %zu, "
      "\"skipped_files\": %zu}\n",
      o.out.c_str(), o.model.empty() ? "byte-level" : o.model.c_str(),
      static_cast<long long>(t.vocab()), static_cast<long long>(writer.documents()),
      static_cast<long long>(writer.tokens()), static_cast<long long>(bytes),
      static_cast<double>(bytes) / static_cast<double>(writer.tokens()), files.size(),
      skipped.size());
  return 0;
}

}  // namespace

Command add_tokenize_command(CLI::App& app) {
  auto train_opt = std::make_shared<TokenizeOptions>();
  auto encode_opt = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand(
      "tokenize", "train a SentencePiece tokenizer on your text, or encode text into a token file");
  sub->require_subcommand(1);
  CLI::App* train = sub->add_subcommand("train", "train a BPE or unigram tokenizer model");
  add_input_options(train, *train_opt);
  train->add_option("--vocab", train_opt->training.vocab, "vocabulary size")->required();
  train->add_option("--type", train_opt->training.type, "bpe | unigram")
      ->check(CLI::IsMember({"bpe", "unigram"}));
  CLI::App* encode =
      sub->add_subcommand("encode", "write a token file (data \"tokens\") from text files");
  add_input_options(encode, *encode_opt);
  encode->add_option("--model", encode_opt->model,
                     "tokenizer model of `tokenize train` (default: byte-level, vocab 256)");
  return {sub, [train, train_opt, encode_opt] {
            return train->parsed() ? run_train(*train_opt) : run_encode(*encode_opt);
          }};
}

}  // namespace tessel::cli
