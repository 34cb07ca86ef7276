// End-to-end training on the real datasets (Debian packages `fortunes` and
// `dataset-fashion-mnist`): the models learn, and runs are deterministic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "tessel/base/error.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/trainer.h"

namespace tessel {
namespace {

TrainConfig small_gpt() {
  TrainConfig c;
  c.model = "gpt";
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 64;
  c.context = 32;
  c.batch = 16;
  c.steps = 300;
  c.lr = 3e-3;
  c.min_lr = 3e-4;
  c.warmup_steps = 10;
  c.eval_batches = 8;
  c.threads = 2;
  return c;
}

TEST(Training, SmallGptBeatsUnigramEntropyOnFortunes) {
  TrainConfig c = small_gpt();
  Trainer trainer(c);
  for (int64_t s = 0; s < c.steps; ++s) trainer.step();
  EvalResult val = trainer.evaluate();
  const double entropy = trainer.task().baseline_loss();
  // A model that only learnt byte frequencies would sit at the entropy; we
  // ask for a clear margin below it.
  EXPECT_LT(val.loss, entropy - 0.35) << "val loss " << val.loss << ", unigram entropy " << entropy;
}

TEST(Training, SameSeedGivesBitwiseIdenticalLosses) {
  TrainConfig c = small_gpt();
  c.steps = 6;
  c.dropout = 0.1;  // dropout masks must be deterministic too
  std::vector<double> first, second;
  {
    Trainer t(c);
    for (int s = 0; s < c.steps; ++s) first.push_back(t.step().loss);
  }
  {
    Trainer t(c);
    for (int s = 0; s < c.steps; ++s) second.push_back(t.step().loss);
  }
  for (int s = 0; s < c.steps; ++s)
    EXPECT_EQ(std::memcmp(&first[s], &second[s], sizeof(double)), 0)
        << "step " << s << ": " << first[s] << " vs " << second[s];
  // And the losses do move: a frozen model would pass the check above.
  EXPECT_NE(first.front(), first.back());
}

// Recomputing each block's activations in backward changes where values are
// computed, not what: losses and weights are bitwise those of storing them
// (dropout masks included), and the planned arena shrinks.
TEST(Training, BlockRecomputationIsBitwiseIdenticalAndSmaller) {
  TrainConfig c = small_gpt();
  c.steps = 5;
  c.dropout = 0.1;
  Trainer stored(c);
  c.recompute = "blocks";
  Trainer recomputed(c);
  for (int s = 0; s < c.steps; ++s) {
    double a = stored.step().loss, b = recomputed.step().loss;
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "step " << s << ": " << a << " vs " << b;
  }
  for (size_t i = 0; i < stored.params().entries().size(); ++i) {
    const ParamEntry& x = stored.params().entries()[i];
    const ParamEntry& y = recomputed.params().entries()[i];
    EXPECT_EQ(std::memcmp(x.value.to_host().data(), y.value.to_host().data(), x.value.nbytes()), 0)
        << x.name;
  }
  EXPECT_LT(recomputed.arena_bytes(), stored.arena_bytes() * 3 / 4)
      << "stored " << stored.arena_bytes() << " B, recomputed " << recomputed.arena_bytes() << " B";
}

// Dropout on the attention probabilities: recomputation redraws the same
// masks (bitwise the losses and weights of storing everything, fused and
// unfused, with selective recomputing the unfused path's dropped-out
// probabilities), and the fused op draws the unfused path's masks (losses
// within 1e-5 over three steps; 1e-6 per op: tests/kernels/attention_test.cc).
TEST(Training, AttentionDropoutRecomputesItsMasksAndFusedMatchesUnfused) {
  TrainConfig c = small_gpt();
  c.attention_dropout = 0.1;
  c.steps = 3;
  std::map<std::string, std::vector<double>> losses;
  for (const char* attention : {"fused", "unfused"}) {
    c.attention = attention;
    c.recompute = "none";
    Trainer stored(c);
    for (int s = 0; s < c.steps; ++s) losses[attention].push_back(stored.step().loss);
    for (const char* spec : {"blocks", "selective"}) {
      if (std::string(attention) == "fused" && std::string(spec) == "selective") continue;
      c.recompute = spec;
      Trainer recomputed(c);
      for (int s = 0; s < c.steps; ++s) {
        const double b = recomputed.step().loss;
        EXPECT_EQ(std::memcmp(&losses[attention][s], &b, sizeof b), 0)
            << attention << ", " << spec << " step " << s << ": " << losses[attention][s] << " vs "
            << b;
      }
      for (size_t i = 0; i < stored.params().entries().size(); ++i) {
        const ParamEntry& x = stored.params().entries()[i];
        const ParamEntry& y = recomputed.params().entries()[i];
        const std::vector<float> xv = x.value.to_host(), yv = y.value.to_host();
        EXPECT_EQ(std::memcmp(xv.data(), yv.data(), xv.size() * sizeof(float)), 0)
            << attention << ", " << spec << ": " << x.name;
      }
    }
  }
  c.attention_dropout = 0;
  c.attention = "fused";
  c.recompute = "none";
  Trainer without(c);
  for (int s = 0; s < c.steps; ++s) {
    const double fused = losses["fused"][s], unfused = losses["unfused"][s];
    EXPECT_LE(std::abs(fused - unfused), 1e-5 * std::abs(unfused)) << "step " << s;
    EXPECT_NE(without.step().loss, fused) << "step " << s << ": the dropout changed nothing";
  }
}

// Selective recomputation (each block's attention core) and Chen et al.'s
// grouped segments (blocks:K, only every K-th block's input stored) change
// where values are computed, not what: bitwise the losses and weights of
// storing everything. Selective frees less than whole blocks, because it
// recomputes only the (batch, heads, seq, kseq) values and the MLP's
// activation outputs; with fused attention, only the latter.
TEST(Training, SelectiveAndGroupedRecomputationAreBitwiseIdentical) {
  TrainConfig c = small_gpt();
  c.attention = "unfused";  // selective's attention core: the stored probabilities
  c.n_layer = 4;
  c.steps = 3;
  c.dropout = 0.1;
  Trainer stored(c);
  std::vector<double> losses;
  for (int s = 0; s < c.steps; ++s) losses.push_back(stored.step().loss);
  std::map<std::string, size_t> arena;
  for (const char* spec : {"selective", "blocks", "blocks:2", "blocks:1:2+selective"}) {
    c.recompute = spec;
    Trainer recomputed(c);
    for (int s = 0; s < c.steps; ++s) {
      double b = recomputed.step().loss;
      EXPECT_EQ(std::memcmp(&losses[s], &b, sizeof b), 0)
          << spec << " step " << s << ": " << losses[s] << " vs " << b;
    }
    for (size_t i = 0; i < stored.params().entries().size(); ++i) {
      const ParamEntry& x = stored.params().entries()[i];
      const ParamEntry& y = recomputed.params().entries()[i];
      EXPECT_EQ(std::memcmp(x.value.to_host().data(), y.value.to_host().data(), x.value.nbytes()),
                0)
          << spec << ": " << x.name;
    }
    arena[spec] = recomputed.arena_bytes();
  }
  const size_t none = stored.arena_bytes();
  std::string sizes = "arena bytes: none " + std::to_string(none);
  for (const auto& [spec, bytes] : arena) sizes += ", " + spec + " " + std::to_string(bytes);
  EXPECT_LT(arena["selective"], none) << sizes;
  EXPECT_LT(arena["blocks"], arena["selective"]) << sizes;
  EXPECT_LT(arena["blocks:2"], none) << sizes;
  EXPECT_LT(arena["blocks:1:2+selective"], arena["selective"]) << sizes;
  c.attention = "fused";
  c.recompute = "none";
  Trainer fused(c);
  c.recompute = "selective";
  Trainer fused_selective(c);
  for (int s = 0; s < c.steps; ++s) {
    const double a = fused.step().loss, b = fused_selective.step().loss;
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "fused, selective, step " << s;
  }
  EXPECT_LT(fused_selective.arena_bytes(), fused.arena_bytes());
  EXPECT_LT(fused.arena_bytes(), none) << "fused attention's arena is not below unfused's";
}

TEST(Training, MlpLearnsFashionMnist) {
  TrainConfig c;
  c.model = "mlp";
  c.data = "fashion-mnist";
  c.hidden = 128;
  c.batch = 64;
  c.steps = 200;
  c.lr = 2e-3;
  c.min_lr = 2e-4;
  c.warmup_steps = 10;
  c.weight_decay = 0.0;
  c.eval_batches = 20;
  c.threads = 2;
  Trainer trainer(c);
  for (int64_t s = 0; s < c.steps; ++s) trainer.step();
  EvalResult val = trainer.evaluate();
  ASSERT_TRUE(val.accuracy.has_value());
  EXPECT_GT(*val.accuracy, 0.70) << "test accuracy after 200 steps (chance is 0.10)";
  EXPECT_LT(val.loss, trainer.task().baseline_loss() / 2);
}

TEST(Training, CheckpointRoundTripRestoresParametersExactly) {
  TrainConfig c = small_gpt();
  c.steps = 3;
  auto dir = std::filesystem::temp_directory_path() / ("tessel_ckpt_" + std::to_string(getpid()));
  Trainer a(c);
  for (int s = 0; s < 3; ++s) a.step();
  save_checkpoint(dir.string(), c, a.params(), a.steps_done());
  EXPECT_FALSE(std::filesystem::exists(dir.string() + ".tmp-" + std::to_string(getpid())));

  Trainer b(c);
  load_checkpoint(dir.string(), b.params());
  EXPECT_EQ(read_checkpoint_info(dir.string()).step, 3);
  for (size_t i = 0; i < a.params().entries().size(); ++i) {
    const ParamEntry& pa = a.params().entries()[i];
    const ParamEntry& pb = b.params().entries()[i];
    ASSERT_EQ(std::memcmp(pa.value.to_host().data(), pb.value.to_host().data(), pa.value.nbytes()),
              0)
        << pa.name;
    ASSERT_EQ(std::memcmp(pa.m.to_host().data(), pb.m.to_host().data(), pa.m.nbytes()), 0)
        << pa.name << ".m";
  }
  // Training continues identically from the restored state.
  b.set_steps_done(3);
  EXPECT_EQ(a.step().loss, b.step().loss);
  std::filesystem::remove_all(dir);
}

TEST(Training, CheckpointWithWrongShapeIsRejectedAndLeavesParamsUntouched) {
  TrainConfig c = small_gpt();
  auto dir =
      std::filesystem::temp_directory_path() / ("tessel_ckpt_bad_" + std::to_string(getpid()));
  Trainer a(c);
  save_checkpoint(dir.string(), c, a.params(), 0);
  TrainConfig wider = c;
  wider.d_model = 96;
  wider.n_head = 2;
  Trainer b(wider);
  const std::vector<float> before = b.params().entries()[0].value.to_host();
  try {
    load_checkpoint(dir.string(), b.params());
    ADD_FAILURE() << "loading a d_model=64 checkpoint into d_model=96 must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expects"), std::string::npos) << e.what();
  }
  const std::vector<float> after = b.params().entries()[0].value.to_host();
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel
