#include "tessel/train/text_model.h"

#include <algorithm>
#include <cmath>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"
#include "tessel/compile/model_registry.h"
#include "tessel/train/checkpoint/checkpoint_tokenizer.h"
#include "tessel/train/data/text_corpus.h"
#include "tessel/train/data/token_dataset.h"
#include "tessel/train/task.h"

namespace tessel {
namespace {

Tokenizer checkpoint_tokenizer_of(const std::string& dir) {
  const std::string path = checkpoint_tokenizer(dir);
  return path.empty() ? Tokenizer::byte_level() : Tokenizer::load(path);
}

}  // namespace

TextModel::TextModel(const std::string& checkpoint_dir)
    : info_(read_checkpoint_info(checkpoint_dir)),
      tokenizer_(checkpoint_tokenizer_of(checkpoint_dir)) {
  if (info_.config.data != "fortunes" && info_.config.data != "tokens")
    TS_THROW(
        "checkpoint '", checkpoint_dir, "' holds a \"", info_.config.model,
        "\" model trained on \"", info_.config.data,
        "\"; sampling and text evaluation need a text model (data \"fortunes\" or \"tokens\")");
  if (tokenizer_.vocab() > info_.config.vocab)
    TS_THROW("checkpoint '", checkpoint_dir, "': its tokenizer has ", tokenizer_.vocab(),
             " ids, more than the model's vocab ", info_.config.vocab);
  info_.config.validate();
  one_row_ = compile(1);
  params_ = std::make_unique<ParamStore>(one_row_.program->graph(), one_row_.program->backend(),
                                         info_.config.seed);
  load_checkpoint(checkpoint_dir, *params_, /*with_optimizer=*/false);
  for (ParamEntry& e : params_->entries())
    one_row_.program->bind_param(e.name, e.value.device_f32());
}

TextModel::Compiled TextModel::compile(int64_t batch) {
  Graph graph;
  GraphBuilder b(graph);
  // Through the registry, so text models registered elsewhere (Python) sample
  // too; with the loss unfused, which has logits to sample from.
  TrainConfig config = info_.config;
  config.loss = "unfused";
  TaskGraph g = build_model(config, b, batch, /*training=*/false);  // no dropout
  TS_CHECK(g.logits, "model '", info_.config.model, "' has no logits to sample from");
  Compiled c{std::make_unique<Program>(graph, std::vector<ValueId>{*g.logits, g.loss}), *g.logits,
             g.loss};
  if (params_)
    for (ParamEntry& e : params_->entries()) c.program->bind_param(e.name, e.value.device_f32());
  return c;
}

std::string TextModel::sample(const std::string& prompt, int64_t count, float temperature,
                              uint64_t seed) {
  const int64_t context = info_.config.context, vocab = tokenizer_.vocab();
  std::vector<int32_t> text = tokenizer_.encode(prompt.empty() ? std::string("\n") : prompt);
  if (text.empty()) text = tokenizer_.encode("\n");
  const std::vector<int32_t> prompt_ids = text;
  PhiloxStream stream(seed, "sample");
  Program& p = *one_row_.program;
  std::vector<int32_t> tokens(context, 0);
  p.write_input("targets", tokens.data(), tokens.size() * sizeof(int32_t));  // zeros
  std::vector<float> all_logits;
  std::vector<int32_t> out;
  for (int64_t i = 0; i < count; ++i) {
    int64_t start = std::max<int64_t>(0, static_cast<int64_t>(text.size()) - context);
    int64_t len = static_cast<int64_t>(text.size()) - start;
    std::fill(tokens.begin(), tokens.end(), 0);
    std::copy(text.begin() + start, text.end(), tokens.begin());
    p.write_input("tokens", tokens.data(), tokens.size() * sizeof(int32_t));
    p.run();  // causal: positions past len - 1 do not affect it
    all_logits = p.read_f32(one_row_.logits);
    const float* logits = all_logits.data() + (len - 1) * info_.config.vocab;
    const float* const best = std::max_element(logits, logits + vocab);  // the first of equals
    int32_t next = static_cast<int32_t>(best - logits);  // greedy at temperature <= 0
    if (!(temperature <= 0)) {
      const float max_logit = *best;
      double total = 0;
      std::vector<double> prob(vocab);
      for (int32_t v = 0; v < vocab; ++v)
        total += prob[v] = std::exp((logits[v] - max_logit) / temperature);
      double u = stream.uniform(i) * total;
      for (next = 0; next < vocab - 1 && u >= prob[next]; ++next) u -= prob[next];
    }
    text.push_back(next);
    out.push_back(next);
  }
  // Decoded after the prompt, so a word's leading space (SentencePiece drops
  // it at the start of a text) stays.
  const std::string before = tokenizer_.decode(prompt_ids), all = tokenizer_.decode(text);
  return all.compare(0, before.size(), before) == 0 ? all.substr(before.size())
                                                    : tokenizer_.decode(out);
}

TextModel::Score TextModel::score(const std::vector<uint8_t>& text) {
  return score_tokens(
      tokenizer_.encode(std::string_view(reinterpret_cast<const char*>(text.data()), text.size())));
}

TextModel::Score TextModel::score_token_file(const std::string& path) {
  TokenFile file = TokenFile::open(path);
  if (file.tokenizer_hash() != tokenizer_.hash())
    TS_THROW(
        "token file '", path, "' was cut by ",
        file.tokenizer_hash() == 0 ? std::string("no tokenizer (byte-level)") : "another tokenizer",
        "; the checkpoint's is ",
        tokenizer_.path().empty() ? std::string("byte-level") : tokenizer_.path(),
        ": they must match");
  const TokenDataset data(std::move(file), info_.config.context, info_.config.val_fraction,
                          info_.config.seed);
  std::vector<int32_t> ids(data.val().size());
  data.val().copy(0, data.val().size(), ids.data());
  return score_tokens(ids);
}

TextModel::Score TextModel::score_tokens(const std::vector<int32_t>& ids) {
  const int64_t context = info_.config.context;
  // Window w: tokens [w*context, (w+1)*context), targets shifted by one.
  const int64_t windows = count_eval_windows(static_cast<int64_t>(ids.size()), context);
  if (windows == 0)
    TS_THROW("eval: the text has ", ids.size(), " tokens; it needs more than 'context' (", context,
             ") to score one window");
  const int64_t batch = std::min<int64_t>(info_.config.batch, windows);
  Compiled many = compile(batch);
  double total = 0;
  int64_t w = 0;
  auto run_rows = [&](Compiled& c, int64_t rows) {
    const int32_t* src = ids.data() + w * context;
    const size_t bytes = static_cast<size_t>(rows * context) * sizeof(int32_t);
    c.program->write_input("tokens", src, bytes);
    c.program->write_input("targets", src + 1, bytes);
    c.program->run();
    total += static_cast<double>(c.program->read_scalar(c.loss)) * rows;
    w += rows;
  };
  while (windows - w >= batch) run_rows(many, batch);
  while (w < windows) run_rows(one_row_, 1);
  Score s;
  s.tokens_scored = windows * context;
  s.nats_per_token = total / windows;
  // The text the scored targets (tokens 1 .. windows*context) decode to.
  s.bytes_scored = static_cast<int64_t>(
      tokenizer_.decode(std::vector<int32_t>(ids.begin() + 1, ids.begin() + 1 + s.tokens_scored))
          .size());
  s.nats_per_byte = s.nats_per_token * static_cast<double>(s.tokens_scored) /
                    static_cast<double>(std::max<int64_t>(1, s.bytes_scored));
  s.bits_per_byte = s.nats_per_byte / std::log(2.0);
  return s;
}

}  // namespace tessel
