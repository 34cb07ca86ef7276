// `tessel sample` and `tessel eval`: use a trained text model's checkpoint.
#include <cstdio>
#include <cstring>
#include <fstream>

#include "commands.h"
#include "config_options.h"
#include "tessel/train/data/text_corpus.h"
#include "tessel/train/data/token_file.h"
#include "tessel/train/text_model.h"

namespace tessel::cli {
namespace {

struct SampleOptions {
  std::string checkpoint, prompt = "\n";
  int64_t chars = 200;
  float temperature = 0.8f;
  uint64_t seed = 1;
};

struct EvalOptions {
  std::string checkpoint, data;
};

// A file that starts with the token file magic.
bool is_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[sizeof kTokenFileMagic] = {};
  in.read(magic, sizeof magic);
  return in.gcount() == sizeof magic && std::memcmp(magic, kTokenFileMagic, sizeof magic) == 0;
}

}  // namespace

Command add_sample_command(CLI::App& app) {
  auto opt = std::make_shared<SampleOptions>();
  CLI::App* sub = app.add_subcommand(
      "sample", "generate text from a trained text model's checkpoint (gpt, llama)");
  sub->add_option("--checkpoint", opt->checkpoint, "checkpoint directory")->required();
  sub->add_option("--prompt", opt->prompt, "text to continue");
  sub->add_option("--chars", opt->chars, "tokens to generate (bytes for a byte-level model)")
      ->check(at_least(1));
  sub->add_option("--temperature", opt->temperature, "sampling temperature (0: greedy)");
  sub->add_option("--seed", opt->seed, "sampling seed");
  return {sub, [opt] {
            TextModel model(opt->checkpoint);
            std::string text = model.sample(opt->prompt, opt->chars, opt->temperature, opt->seed);
            std::printf("%s%s\n", opt->prompt.c_str(), text.c_str());
            return 0;
          }};
}

Command add_eval_command(CLI::App& app) {
  auto opt = std::make_shared<EvalOptions>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "mean loss of a text model's checkpoint (gpt, llama) on a text file, cut by the "
      "checkpoint's tokenizer: nats per token and bits per byte");
  sub->add_option("--checkpoint", opt->checkpoint, "checkpoint directory")->required();
  sub->add_option("--data", opt->data,
                  "text file to score, or a token file (its validation split, as the run held it "
                  "out)")
      ->required();
  return {sub, [opt] {
            TextModel model(opt->checkpoint);
            const TextModel::Score s = is_token_file(opt->data)
                                           ? model.score_token_file(opt->data)
                                           : model.score(TextCorpus::from_file(opt->data).val);
            std::printf(
                "{\"file\": \"%s\", \"tokenizer\": \"%s\", \"tokens_scored\": %lld, "
                "\"bytes_scored\": %lld, \"nats_per_token\": %.6f, \"nats_per_byte\": %.6f, "
                "\"bits_per_byte\": %.6f}\n",
                opt->data.c_str(),
                model.tokenizer().path().empty() ? "byte-level" : model.tokenizer().path().c_str(),
                static_cast<long long>(s.tokens_scored), static_cast<long long>(s.bytes_scored),
                s.nats_per_token, s.nats_per_byte, s.bits_per_byte);
            return 0;
          }};
}

}  // namespace tessel::cli
