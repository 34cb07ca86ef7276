// Context parallelism under real mpirun (docs/attention.md): `seq` mapped to
// a `ctx` axis, fused attention run by all-to-all (Ulysses) or by ring
// attention, alone and beside data, tensor and pipeline axes, trains the GPT
// and the Llama to one process's losses and weights (the matrix's
// tolerance, layout_harness.h), and each rank's measured peak of tensor
// storage is the dry run's prediction to the byte; in bf16 both stay within
// the bf16 matrix's tolerance. Bad input fails on every rank before any
// compute, naming what is wrong.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

struct ContextCase {
  const char* name;
  const char* model;  // "gpt" | "llama"
  int ranks;
  const char* mesh;
  const char* layout;
  const char* extra;  // more `tessel train` options
};
void PrintTo(const ContextCase& c, std::ostream* out) { *out << c.name; }

class ContextParallel : public LayoutInvariance,
                        public ::testing::WithParamInterface<ContextCase> {};

TEST_P(ContextParallel, MatchesSingleProcessAndItsMemoryPrediction) {
  const ContextCase& c = GetParam();
  const std::string model = c.model;
  TrainRun got = train(c.name, model == "gpt" ? gpt_config() : llama_config(), c.ranks, c.mesh,
                       c.layout, c.extra);
  expect_same(got, reference(model), c.name);
  expect_memory_exact(c.name);
  // The strategy really ran: all-to-alls on ctx, or the ring's sends.
  const std::string kind =
      std::string(c.extra).find("ring") != std::string::npos ? "send" : "all_to_all";
  EXPECT_GT(comm(got, 0, "ctx", kind.c_str()).first, 0) << c.name << " has no " << kind;
}

constexpr const char* kA2a = "--set context_parallel=all_to_all";
constexpr const char* kRing = "--set context_parallel=ring";
constexpr const char* kPipe = "--schedule 1f1b --microbatches 4 --set context_parallel=";
const std::string kPipeA2a = std::string(kPipe) + "all_to_all";
const std::string kPipeRing = std::string(kPipe) + "ring";
const std::string kRingZero1 = std::string(kRing) + " --zero 1";
const std::string kRingZero2 = std::string(kRing) + " --zero 2";
const std::string kRingZero3 = std::string(kRing) + " --zero 3";
const std::string kA2aZero3 = std::string(kA2a) + " --zero 3";
constexpr const char* kGptTensor = "heads=model,hidden=model,vocab=model,seq=ctx";
constexpr const char* kGptDataTensor = "batch=data,heads=model,hidden=model,vocab=model,seq=ctx";
constexpr const char* kLlamaTensor = "kv_heads=model,hidden=model,vocab=model,seq=ctx";

INSTANTIATE_TEST_SUITE_P(
    Context, ContextParallel,
    ::testing::Values(
        ContextCase{"gpt_a2a_ctx2", "gpt", 2, "ctx=2", "seq=ctx", kA2a},
        ContextCase{"gpt_ring_ctx2", "gpt", 2, "ctx=2", "seq=ctx", kRing},
        ContextCase{"gpt_a2a_data2_ctx2", "gpt", 4, "data=2,ctx=2", "batch=data,seq=ctx", kA2a},
        ContextCase{"gpt_ring_data2_ctx2", "gpt", 4, "data=2,ctx=2", "batch=data,seq=ctx", kRing},
        ContextCase{"gpt_ring_ctx4", "gpt", 4, "ctx=4", "seq=ctx", kRing},
        ContextCase{"gpt_ring_model2_ctx2", "gpt", 4, "model=2,ctx=2", kGptTensor, kRing},
        // The GPT has one heads dim: ctx cuts model's heads further (nested).
        ContextCase{"gpt_a2a_model2_ctx2", "gpt", 4, "model=2,ctx=2", kGptTensor, kA2a},
        ContextCase{"gpt_a2a_data2_model2_ctx2", "gpt", 8, "data=2,model=2,ctx=2", kGptDataTensor,
                    kA2a},
        ContextCase{"gpt_a2a_pipe2_model2_ctx2", "gpt", 8, "pipe=2,model=2,ctx=2", kGptTensor,
                    kPipeA2a.c_str()},
        ContextCase{"gpt_a2a_pipe2_ctx2", "gpt", 4, "pipe=2,ctx=2", "seq=ctx", kPipeA2a.c_str()},
        ContextCase{"gpt_ring_pipe2_ctx2", "gpt", 4, "pipe=2,ctx=2", "seq=ctx", kPipeRing.c_str()},
        ContextCase{"llama_a2a_ctx2", "llama", 2, "ctx=2", "seq=ctx", kA2a},
        ContextCase{"llama_ring_ctx2", "llama", 2, "ctx=2", "seq=ctx", kRing},
        ContextCase{"llama_a2a_model2_ctx2", "llama", 4, "model=2,ctx=2", kLlamaTensor, kA2a},
        ContextCase{"llama_ring_model2_ctx2", "llama", 4, "model=2,ctx=2", kLlamaTensor, kRing},
        ContextCase{"llama_a2a_data2_ctx2", "llama", 4, "data=2,ctx=2", "batch=data,seq=ctx", kA2a},
        ContextCase{"llama_ring_data2_ctx2", "llama", 4, "data=2,ctx=2", "batch=data,seq=ctx",
                    kRing},
        ContextCase{"llama_ring_ctx4", "llama", 4, "ctx=4", "seq=ctx", kRing},
        ContextCase{"llama_ring_pipe2_ctx2", "llama", 4, "pipe=2,ctx=2", "seq=ctx",
                    kPipeRing.c_str()},
        // ZeRO over the context axis where no data axis is (FSDP over the
        // context-parallel ranks); the GPT's position table is split over
        // ctx by the layout, so its state is already its shard.
        ContextCase{"gpt_ring_ctx2_zero1", "gpt", 2, "ctx=2", "seq=ctx", kRingZero1.c_str()},
        ContextCase{"gpt_a2a_ctx2_zero3", "gpt", 2, "ctx=2", "seq=ctx", kA2aZero3.c_str()},
        ContextCase{"llama_ring_ctx4_zero2", "llama", 4, "ctx=4", "seq=ctx", kRingZero2.c_str()},
        ContextCase{"llama_ring_ctx2_zero3", "llama", 2, "ctx=2", "seq=ctx", kRingZero3.c_str()}),
    [](const auto& info) { return std::string(info.param.name); });

// Dropout on the attention probabilities (fused op, docs/attention.md) is
// keyed by global batch row, head, query and key position: a data and model
// (heads) split, all-to-all on ctx (alone, and nested in model's heads) and
// the ring's reordered halves drop what one process drops, and predict their
// memory to the byte.
TEST_F(LayoutInvariance, AttentionDropoutMatchesSingleProcess) {
  nlohmann::json c = gpt_config();
  c["attention_dropout"] = 0.1;
  const TrainRun want = train("attn_dropout_single", c, 0);
  // The masks matter: the losses differ from the run without dropout.
  EXPECT_NE(want.steps.back()["loss"].get<double>(),
            reference("gpt").steps.back()["loss"].get<double>());
  struct Split {
    const char *name, *mesh, *layout, *extra;
    int ranks;
  };
  for (const Split& s :
       {Split{"attn_dropout_data2_model2", "data=2,model=2", "", "", 4},
        Split{"attn_dropout_a2a_ctx2", "ctx=2", "seq=ctx", kA2a, 2},
        Split{"attn_dropout_a2a_model2_ctx2", "model=2,ctx=2", kGptTensor, kA2a, 4},
        Split{"attn_dropout_ring_ctx2", "ctx=2", "seq=ctx", kRing, 2},
        Split{"attn_dropout_ring_data2_ctx2", "data=2,ctx=2", "batch=data,seq=ctx", kRing, 4}}) {
    expect_same(train(s.name, c, s.ranks, s.mesh, s.layout, s.extra), want, s.name);
    expect_memory_exact(s.name);
  }
}

// bf16 (operands of each block product rounded, as one bf16 process
// rounds them): both strategies stay within the bf16 matrix's 2e-3 of one
// bf16 process per step (bf16_test.cc).
TEST_F(LayoutInvariance, ContextParallelBf16MatchesOneBf16Process) {
  nlohmann::json c = gpt_config();
  c["steps"] = 6;
  c["eval_every"] = 0;
  c["precision"] = "bf16";
  const TrainRun one = train("cp_bf16_single", c, 0);
  for (const char* strategy : {"all_to_all", "ring"}) {
    const TrainRun two = train(std::string("cp_bf16_") + strategy, c, 2, "ctx=2", "seq=ctx",
                               std::string("--set context_parallel=") + strategy);
    ASSERT_EQ(two.steps.size(), one.steps.size()) << strategy;
    for (size_t s = 0; s < one.steps.size(); ++s) {
      const double a = two.steps[s]["loss"], b = one.steps[s]["loss"];
      EXPECT_LE(std::abs(a - b), 2e-3 * std::abs(b))
          << strategy << " step " << s << ": " << a << " vs " << b;
    }
  }
}

TEST_F(LayoutInvariance, AllToAllNeedsHeadsTheContextAxisDivides) {
  nlohmann::json c = gpt_config();
  c["n_head"] = 2;
  expect_fails("cp_heads_ctx4", c, 4, "--mesh ctx=4 --layout seq=ctx",
               "context_parallel \"all_to_all\": attention 'block0.attn.core' must split a heads "
               "dim over mesh axis 'ctx' of size 4 (its `seq` is split there), but 'heads' (2) "
               "is not divisible by 4");
}

}  // namespace
}  // namespace tessel
