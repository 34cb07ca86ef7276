// The Llama-family model under real mpirun: data, tensor (kv_heads, hidden
// and vocab on the model axis), sequence parallelism, a 1F1B pipeline, ZeRO
// 1-3 and recomputation train to the same losses and weights as one process
// (the matrix's tolerance, layout_harness.h) with GPipe, 1F1B, zero-bubble
// and interleaved pipelines, and each run's measured peak of
// tensor storage is the dry run's prediction to the byte. A model axis that
// does not divide the key/value heads fails on every rank naming the sizes;
// bf16 with sequence parallelism stays within the bf16 matrix's tolerance.
// A representative selection, not the GPT's whole matrix.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

struct LlamaCase {
  const char* name;
  int ranks;
  const char* mesh;
  const char* layout;
  const char* extra;  // more `tessel train` options
};
void PrintTo(const LlamaCase& c, std::ostream* out) { *out << c.name; }

class LlamaLayouts : public LayoutInvariance, public ::testing::WithParamInterface<LlamaCase> {};

TEST_P(LlamaLayouts, MatchesSingleProcessAndItsMemoryPrediction) {
  const LlamaCase& c = GetParam();
  TrainRun got = train(c.name, llama_config(), c.ranks, c.mesh, c.layout, c.extra);
  expect_same(got, reference("llama"), c.name);
  expect_memory_exact(c.name);
}

INSTANTIATE_TEST_SUITE_P(
    Llama, LlamaLayouts,
    ::testing::Values(
        LlamaCase{"llama_data2", 2, "data=2", "", ""},
        LlamaCase{"llama_model2", 2, "model=2", "", ""},
        LlamaCase{"llama_sequence_parallel_model2", 2, "model=2",
                  "kv_heads=model,hidden=model,vocab=model,seq=model", ""},
        LlamaCase{"llama_data2_model2", 4, "data=2,model=2", "", ""},
        LlamaCase{"llama_1f1b_pipe2", 2, "pipe=2", "", "--schedule 1f1b --microbatches 4"},
        LlamaCase{"llama_gpipe_pipe2", 2, "pipe=2", "", "--schedule gpipe --microbatches 4"},
        LlamaCase{"llama_zbh1_pipe2", 2, "pipe=2", "", "--schedule zb-h1 --microbatches 4"},
        LlamaCase{"llama_1f1b_pipe2_data2", 4, "pipe=2,data=2", "",
                  "--schedule 1f1b --microbatches 2"},
        LlamaCase{"llama_zero1_data2", 2, "data=2", "", "--zero 1"},
        LlamaCase{"llama_zero2_data2", 2, "data=2", "", "--zero 2"},
        LlamaCase{"llama_zero3_data2_model2", 4, "data=2,model=2", "", "--zero 3"},
        LlamaCase{"llama_recompute_blocks_data2_model2", 4, "data=2,model=2", "",
                  "--recompute blocks"},
        LlamaCase{"llama_recompute_selective_model2", 2, "model=2", "", "--recompute selective"}),
    [](const auto& info) { return std::string(info.param.name); });

// bf16 (precision bf16, activations stored in bf16 where only einsums read
// them, RMSNorm writing its bf16 output itself): tensor and sequence
// parallelism on data=2,model=2 stay within the bf16 matrix's 2e-3 of one
// bf16 process per step (bf16_test.cc), bf16 really changes the losses, and
// the measured memory is the prediction on every rank.
TEST_F(LayoutInvariance, LlamaBf16SequenceParallelMatchesOneProcess) {
  nlohmann::json c = llama_config();
  c["steps"] = 6;
  c["eval_every"] = 0;
  c["precision"] = "bf16";
  const TrainRun one = train("llama_bf16_single", c, 0);
  const TrainRun four = train("llama_bf16_sp_data2_model2", c, 4, "data=2,model=2",
                              "batch=data,kv_heads=model,hidden=model,vocab=model,seq=model");
  ASSERT_EQ(four.steps.size(), one.steps.size());
  const TrainRun& f32 = reference("llama");
  bool differs_from_f32 = false;
  for (size_t s = 0; s < one.steps.size(); ++s) {
    const double a = four.steps[s]["loss"], b = one.steps[s]["loss"];
    EXPECT_LE(std::abs(a - b), 2e-3 * std::abs(b)) << "step " << s << ": " << a << " vs " << b;
    differs_from_f32 = differs_from_f32 || b != f32.steps[s]["loss"].get<double>();
  }
  EXPECT_TRUE(differs_from_f32) << "bf16 gave the f32 losses";
  expect_memory_exact("llama_bf16_sp_data2_model2");
}

TEST_F(LayoutInvariance, LlamaModelAxisMustDivideTheKeyValueHeads) {
  expect_fails("llama_kv_heads_model4", llama_config(), 4, "--mesh model=4",
               "layout maps kv_heads=2 to mesh axis 'model' of size 4, which does not divide it");
}

}  // namespace
}  // namespace tessel
