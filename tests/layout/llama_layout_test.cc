// The Llama-family model under real mpirun: data, tensor (kv_heads, hidden
// and vocab on the model axis), sequence parallelism, a 1F1B pipeline, ZeRO
// 1-3 and recomputation train to the same losses and weights as one process
// (the matrix's tolerance, layout_harness.h), and each run's measured peak of
// tensor storage is the dry run's prediction to the byte. A model axis that
// does not divide the key/value heads fails on every rank naming the sizes.
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
  const nlohmann::json summary =
      nlohmann::json::parse(std::ifstream(root() / c.name / "out" / "summary.json"));
  const nlohmann::json& ranks = summary["memory_per_rank"];
  ASSERT_EQ(ranks.size(), static_cast<size_t>(std::max(1, c.ranks)));
  for (const nlohmann::json& r : ranks)
    EXPECT_EQ(r["measured_peak_tracked_bytes"].get<int64_t>(),
              r["predicted_bytes"]["total"].get<int64_t>())
        << c.name << " rank " << r["rank"] << "\n"
        << r.dump();
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
        LlamaCase{"llama_zero1_data2", 2, "data=2", "", "--zero 1"},
        LlamaCase{"llama_zero2_data2", 2, "data=2", "", "--zero 2"},
        LlamaCase{"llama_zero3_data2_model2", 4, "data=2,model=2", "", "--zero 3"},
        LlamaCase{"llama_recompute_blocks_data2_model2", 4, "data=2,model=2", "",
                  "--recompute blocks"},
        LlamaCase{"llama_recompute_selective_model2", 2, "model=2", "", "--recompute selective"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(LayoutInvariance, LlamaModelAxisMustDivideTheKeyValueHeads) {
  expect_fails("llama_kv_heads_model4", llama_config(), 4, "--mesh model=4",
               "layout maps kv_heads=2 to mesh axis 'model' of size 4, which does not divide it");
}

}  // namespace
}  // namespace tessel
