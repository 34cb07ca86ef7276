// The fused LM head and loss (`loss: fused`: one linear_cross_entropy op
// that never stores the logits, docs/memory.md) under real mpirun. One
// process fused trains to the unfused one's losses and weights (the
// matrix's tolerance), and fused runs with the rows split (data, sequence
// and context parallelism), the vocab split (tensor parallelism: each rank
// holds a slice of the LM head, the op joins each row's statistics across
// the axis), ZeRO 3 (the head gathered on use) and a pipeline train to the
// fused single process, each rank's peak of tensor
// storage predicted to the byte; the GPT's LM head is (vocab, embed), the
// Llama's (embed, vocab). In bf16 the fused single process stays within the
// bf16 matrix's 2e-3 of the unfused one.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

class FusedLoss : public LayoutInvariance {};

struct Split {
  std::string name, mesh, layout, extra;
  int ranks;
};

TEST_F(FusedLoss, MatchesUnfusedAndEveryLayout) {
  for (const std::string model : {"gpt", "llama"}) {
    nlohmann::json c = model == "gpt" ? gpt_config() : llama_config();
    c["loss"] = "fused";
    const std::string single = "fused_loss_single_" + model;
    const TrainRun one = train(single, c, 0);
    expect_same(one, reference(model), single + " against unfused");
    expect_memory_exact(single);
    const std::string heads = model == "gpt" ? "heads" : "kv_heads";
    const std::string tensor = heads + "=model,hidden=model,vocab=model";
    for (const Split& s :
         {Split{"data2", "data=2", "batch=data", "", 2}, Split{"model2", "model=2", tensor, "", 2},
          Split{"data2_model2_sp", "data=2,model=2", tensor + ",batch=data,seq=model", "", 4},
          Split{"data2_zero3", "data=2", "batch=data", "--zero 3", 2},
          Split{"ctx2_ring", "ctx=2", "seq=ctx", "--set context_parallel=ring", 2},
          Split{"pipe2", "pipe=2", "", "--schedule 1f1b --microbatches 4", 2}}) {
      const std::string name = "fused_loss_" + model + "_" + s.name;
      expect_same(train(name, c, s.ranks, s.mesh, s.layout, s.extra), one, name);
      expect_memory_exact(name);
    }
  }
}

TEST_F(FusedLoss, InBf16StaysWithinTheBf16Tolerance) {
  nlohmann::json c = gpt_config();
  c["steps"] = 6;
  c["eval_every"] = 0;
  c["precision"] = "bf16";
  const TrainRun unfused = train("bf16_unfused_loss", c, 0);
  c["loss"] = "fused";
  const TrainRun fused = train("bf16_fused_loss", c, 0);
  const TrainRun split = train("bf16_fused_loss_data2_model2", c, 4, "data=2,model=2",
                               "batch=data,heads=model,hidden=model,vocab=model");
  for (size_t s = 0; s < unfused.steps.size(); ++s) {
    const double want = unfused.steps[s]["loss"];
    EXPECT_LE(std::abs(fused.steps[s]["loss"].get<double>() - want), 2e-3 * std::abs(want))
        << "step " << s;
    EXPECT_LE(std::abs(split.steps[s]["loss"].get<double>() - want), 2e-3 * std::abs(want))
        << "step " << s;
  }
}

}  // namespace
}  // namespace tessel
