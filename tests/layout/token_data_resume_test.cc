// Token data's global sample order survives resharding, under real mpirun:
// a run on data=2 saving at step 5, resumed on data=4 and on one process,
// reads the same samples in the same order as the uninterrupted run (each
// step's first global sample and the digest of its windows are equal), with
// losses and final weights within the layout-invariance tolerance; the
// manifest records the samples consumed, and a resume with another batch
// size continues at that sample. The token file is Debian's fortunes
// cut byte-level by `tessel tokenize encode`.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

class TokenDataResume : public LayoutInvariance {
 protected:
  static nlohmann::json token_config() {
    static const fs::path file = [] {
      const fs::path p = root() / "fortunes-bytes.tok";
      fs::create_directories(root());
      int status = 0;
      const std::string out = run(std::string(TESSEL_CLI_PATH) +
                                      " tokenize encode --input /usr/share/games/fortunes "
                                      "--separator % --out " +
                                      p.string(),
                                  &status);
      EXPECT_EQ(status, 0) << out;
      return p;
    }();
    nlohmann::json c = gpt_config();
    c["steps"] = 8;
    c["eval_every"] = 0;
    c["data"] = "tokens";
    c["token_file"] = file.string();
    return c;
  }

  // `got` ran steps [first, 8) of `want`: the same samples in the same
  // order, the same losses (rel 1e-5) and final weights.
  static void expect_same_samples(const TrainRun& got, const TrainRun& want, size_t first,
                                  const std::string& what) {
    ASSERT_EQ(got.steps.size() + first, want.steps.size()) << what;
    for (size_t i = 0; i < got.steps.size(); ++i) {
      const nlohmann::json& g = got.steps[i];
      const nlohmann::json& w = want.steps[first + i];
      EXPECT_EQ(g["step"], w["step"]) << what;
      ASSERT_TRUE(g.contains("data")) << what << ": " << g;
      EXPECT_EQ(g["data"]["first_sample"], w["data"]["first_sample"]) << what << " step " << i;
      EXPECT_EQ(g["data"]["windows_digest"], w["data"]["windows_digest"])
          << what << ": other samples at step " << first + i;
    }
    TrainRun want_tail = want;
    want_tail.steps.erase(want_tail.steps.begin(), want_tail.steps.begin() + first);
    expect_same(got, want_tail, what);
  }
};

TEST_F(TokenDataResume, DataTwoResumesOnDataFourAndOneProcessWithTheSameSamples) {
  const nlohmann::json config = token_config();
  const TrainRun ref = train("tok_data2", config, 2, "data=2", "", "--checkpoint-every 5");
  ASSERT_EQ(ref.steps.size(), 8u);
  for (size_t s = 0; s < ref.steps.size(); ++s)  // the next batch of the order each step
    EXPECT_EQ(ref.steps[s]["data"]["first_sample"], 8 * s);
  EXPECT_NE(ref.steps[0]["data"]["windows_digest"], ref.steps[1]["data"]["windows_digest"]);
  // One process, uninterrupted: the same samples (layout invariance).
  expect_same_samples(train("tok_one", config, 0), ref, 0, "one process");

  const fs::path ckpt = root() / "tok_data2" / "out" / "checkpoints" / "step-5";
  const nlohmann::json manifest = nlohmann::json::parse(std::ifstream(ckpt / "manifest.json"));
  EXPECT_EQ(manifest["state"]["data_position"]["consumed_samples"], 40);

  expect_same_samples(
      train("tok_data4_resumed", config, 4, "data=4", "", "--resume " + ckpt.string()), ref, 5,
      "data=2 step 5 resumed on data=4");
  expect_same_samples(train("tok_one_resumed", config, 0, "", "", "--resume " + ckpt.string()), ref,
                      5, "data=2 step 5 resumed on one process");

  // Another batch size continues at the consumed sample with its own size.
  const TrainRun smaller = train("tok_batch4_resumed", config, 2, "data=2", "",
                                 "--set batch=4 --resume " + ckpt.string());
  ASSERT_EQ(smaller.steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(smaller.steps[i]["data"]["first_sample"], 40 + 4 * i);
}

// `tessel eval` on a token file scores its validation split with the
// checkpoint's tokenizer; a file cut by another tokenizer is refused.
TEST_F(TokenDataResume, EvalOnATokenFileNeedsTheCheckpointsTokenizer) {
  nlohmann::json config = token_config();
  config["steps"] = 3;
  config["val_fraction"] = 0.01;  // 150 documents: a quick eval
  train("tok_eval", config, 0);
  const std::string cli = TESSEL_CLI_PATH,
                    ckpt = (root() / "tok_eval" / "out" / "checkpoint").string();
  int status = 0;
  const std::string out =
      run(cli + " eval --checkpoint " + ckpt + " --data " + config["token_file"].get<std::string>(),
          &status);
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json score = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_GT(score["tokens_scored"].get<int64_t>(), 0);
  EXPECT_EQ(score["bytes_scored"], score["tokens_scored"]);  // byte-level
  EXPECT_NEAR(score["bits_per_byte"].get<double>(),
              score["nats_per_token"].get<double>() / std::log(2.0), 1e-5);

  const fs::path model = root() / "tok_eval" / "bpe.model", bpe = root() / "tok_eval" / "bpe.tok";
  const std::string text = " --input /usr/share/games/fortunes/computers --separator % ";
  run(cli + " tokenize train" + text + "--vocab 400 --out " + model.string(), &status);
  ASSERT_EQ(status, 0);
  run(cli + " tokenize encode" + text + "--model " + model.string() + " --out " + bpe.string(),
      &status);
  ASSERT_EQ(status, 0);
  const std::string refused =
      run(cli + " eval --checkpoint " + ckpt + " --data " + bpe.string(), &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(refused.find("token file '" + bpe.string() + "' was cut by another tokenizer"),
            std::string::npos)
      << refused;
}

}  // namespace
}  // namespace tessel
