// The Llama-family model's checkpoints under real mpirun, and its
// interleaved pipeline: a run resumed from its step-2 checkpoint on the
// same layout continues bitwise; a checkpoint saved on tensor and data
// parallelism with ZeRO 1 resumes on one process, on a 1F1B pipeline and
// on ZeRO 3 within the layout-invariance tolerance of the uninterrupted
// run; an interleaved pipeline (two chunks per stage, beside a data axis)
// trains as one process does. The GPT's full resume and resharding
// matrices are in resume_test.cc; these check what the Llama adds
// (untied head, kv_heads, SwiGLU's three matrices) on the same paths.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

nlohmann::json short_llama() {
  nlohmann::json c = llama_config();
  c["steps"] = 4;
  c["eval_every"] = 0;
  return c;
}

// Steps 2 and 3 of `run`, as a resumed run writes them.
TrainRun last_two(TrainRun run) {
  run.steps.erase(run.steps.begin(), run.steps.begin() + 2);
  return run;
}

TEST_F(LayoutInvariance, LlamaResumesBitwiseOnItsLayout) {
  const nlohmann::json c = short_llama();
  const char* mesh = "data=2,model=2";
  const TrainRun saving =
      train("llama_resume_saving", c, 4, mesh, "", "--zero 1 --checkpoint-every 2");
  const fs::path step2 = root() / "llama_resume_saving" / "out" / "checkpoints" / "step-2";
  ASSERT_TRUE(fs::exists(step2 / "manifest.json"));
  const TrainRun resumed =
      train("llama_resume_same", c, 4, mesh, "", "--zero 1 --resume " + step2.string());
  const TrainRun want = last_two(saving);
  ASSERT_EQ(resumed.steps.size(), want.steps.size());
  for (size_t i = 0; i < want.steps.size(); ++i)
    EXPECT_EQ(resumed.steps[i]["loss"].get<double>(), want.steps[i]["loss"].get<double>())
        << "step " << i + 2;
  ASSERT_EQ(resumed.params.tensors.size(), saving.params.tensors.size());
  for (const TensorRecord& t : saving.params.tensors) {
    const TensorRecord* g = resumed.params.find(t.name);
    ASSERT_NE(g, nullptr) << t.name;
    EXPECT_TRUE(g->bytes == t.bytes) << t.name << " differs from the uninterrupted run";
  }
}

TEST_F(LayoutInvariance, LlamaCheckpointsReshardToOtherLayouts) {
  const nlohmann::json c = short_llama();
  train("llama_reshard_src", c, 4, "data=2,model=2", "", "--zero 1 --checkpoint-every 2");
  const std::string step2 =
      (root() / "llama_reshard_src" / "out" / "checkpoints" / "step-2").string();
  const TrainRun want = last_two(train("llama_reshard_ref", c, 0));
  expect_same(train("llama_reshard_to_one", c, 0, "", "", "--resume " + step2), want,
              "data=2,model=2 zero 1 -> one process");
  expect_same(train("llama_reshard_to_pipe2", c, 2, "pipe=2", "",
                    "--schedule 1f1b --microbatches 2 --resume " + step2),
              want, "data=2,model=2 zero 1 -> pipe=2");
  expect_same(train("llama_reshard_to_zero3", c, 4, "data=4", "", "--zero 3 --resume " + step2),
              want, "data=2,model=2 zero 1 -> data=4 zero 3");
}

TEST_F(LayoutInvariance, LlamaInterleavedPipelineMatchesOneProcess) {
  nlohmann::json c = llama_config();
  c["n_layer"] = 4;  // two chunks on each of two stages
  c["steps"] = 6;
  c["eval_every"] = 3;
  expect_same(train("llama_interleaved_pipe2_data2", c, 4, "pipe=2,data=2", "",
                    "--schedule interleaved --chunks 2 --microbatches 2"),
              train("llama_interleaved_single", c, 0), "interleaved pipe=2,data=2");
}

}  // namespace
}  // namespace tessel
